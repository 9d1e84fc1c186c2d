#!/usr/bin/env bash
# The frameworks' own test suites (AutoGen AgentChat 0.7.5, smolagents 1.26) from their pinned sdists, in their own
# venv ~/.cache/causaltrace/peer-suites/venv, for tests/test_peer_suites.py and benchmarks/peer_suites.py.
# Cached: a second run only checks. smolagents' test helpers missing from its sdist are used when cached there
# (benchmarks/peer_suites.py --smolagents-git DIR); without them 16 tests of the subset CI runs cannot
# start (their fixtures are missing) and are compared as errors in both modes.
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" benchmarks/peer_suites.py --setup-only
