"""A schema-driven fake model for the issue-6 methods: answers each stage from the JSON schema it was sent.

``SchemaAnswerer(overrides)`` builds a valid answer for any stage: enums take their first (or a chosen) value,
integer ranges their minimum, strings a short text, arrays one item. ``overrides[stage_id]`` may be a dict merged
into the generated answer, or a function ``(info, generated) -> answer`` (a dict, or a raw string to send as is).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from causaltrace.testing.judges import CallInfo, FunctionJudge


def generate(schema: Mapping[str, Any], prefer: Callable[[list[Any]], Any] | None = None) -> Any:
    """A valid instance of ``schema`` (the judge's inlined, strict schemas)."""
    if "anyOf" in schema:
        non_null = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return generate(non_null[0], prefer) if non_null else None
    if "enum" in schema:
        values = list(schema["enum"])
        return prefer(values) if prefer else values[0]
    kind = schema.get("type")
    if kind == "object":
        return {k: generate(v, prefer) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [generate(schema.get("items", {}), prefer)]
    if kind == "integer":
        return int(schema.get("minimum", 0))
    if kind == "number":
        return 0.5
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "a short reason"


class SchemaAnswerer:
    """The function behind a FunctionJudge (module docstring)."""

    def __init__(self, overrides: Mapping[str, Any] | None = None) -> None:
        self.overrides = dict(overrides or {})

    def __call__(self, messages: list[dict[str, str]], info: CallInfo) -> Any:
        generated = generate(info.schema or {})
        override = self.overrides.get(info.stage_id)
        if callable(override):
            return override(info, generated)
        if isinstance(override, Mapping):  # made to fit the call's schema (enum misses dropped or replaced)
            return conform({**generated, **override}, info.schema or {}, generated)
        return generated


def fake(overrides: Mapping[str, Any] | None = None, **kw: Any) -> FunctionJudge:
    """A FunctionJudge answering every stage from its schema."""
    return FunctionJudge(SchemaAnswerer(overrides), **kw)


def shown_steps(prompt: str) -> list[int]:
    """The step numbers rendered in a prompt (``Step {i} - speaker: …`` lines)."""
    return [int(m) for m in re.findall(r"^Step (\d+) - ", prompt, re.MULTILINE)]


def conform(value: Any, schema: Mapping[str, Any], generated: Any) -> Any:
    """``value`` made valid for ``schema``: enum misses → the generated value; list items that miss → dropped."""
    if "enum" in schema:
        return value if value in schema["enum"] else generated
    if schema.get("type") == "object" and isinstance(value, Mapping):
        props = schema.get("properties", {})
        gen = generated if isinstance(generated, Mapping) else {}
        return {k: conform(value[k], props[k], gen.get(k)) if k in value else gen.get(k) for k in props}
    if schema.get("type") == "array" and isinstance(value, list):
        items = schema.get("items", {})
        out = []
        for v in value:
            fixed = conform(v, items, None)
            if fixed is not None and fixed == v:
                out.append(v)
        return out
    return value


def constrained(value: Mapping[str, Any]) -> Callable[[CallInfo, Any], Any]:
    """An override answering ``value`` where the call's schema allows it (module docstring of :func:`conform`)."""
    def answer(info: CallInfo, generated: Any) -> Any:
        return conform(dict(value), info.schema or {}, generated)
    return answer
