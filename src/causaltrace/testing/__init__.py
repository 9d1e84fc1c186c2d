"""Test doubles shipped with causaltrace: reactive scripted models for AutoGen (``causaltrace.testing.autogen``) and
smolagents (``causaltrace.testing.smolagents``), and fixtures. Each submodule imports its framework lazily."""
