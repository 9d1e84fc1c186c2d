"""The output schemas of the LLM stages, and answers fitted to a small model's budget (split from :mod:`.judge`).

Each stage passes a pydantic model (:func:`output_model`); its JSON schema (:func:`json_schema_for`: inlined,
strict), with the ``enum`` of agent names and ``minimum`` / ``maximum`` or ``enum`` of step indices built per call
(:func:`step_index` / :func:`agent_name`), goes to the model as ``response_format`` and is also shown in the prompt.
A 135M model invents steps unless the grammar forbids it (FACTS.md "A real local LLM"). A backend with a small
output cap that enforces the schema as a grammar fits it to its answer budget first (:func:`fit_schema`, used by
the local model) and shows :func:`answer_template` instead of the full schema (:func:`compact_schema_in_messages`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = [
    "agent_name",
    "answer_template",
    "answer_tokens",
    "compact_schema_in_messages",
    "fit_schema",
    "json_schema_for",
    "number_grid",
    "output_model",
    "short_text",
    "step_index",
]

def step_index(lo: int | Sequence[int], hi: int | None = None) -> Any:
    """A step-index field type: ``step_index(0, n - 1)`` (``minimum`` / ``maximum``) or ``step_index([3, 7])``
    (``enum``)."""
    if hi is None:
        values = (lo,) if isinstance(lo, int) else tuple(sorted(set(lo)))
        if not values:
            raise ValueError("step_index needs at least one allowed index")
        return Literal[values]  # type: ignore[valid-type]
    if not isinstance(lo, int) or hi < lo:
        raise ValueError(f"empty step range {lo}..{hi}")
    return Annotated[int, Field(ge=lo, le=hi)]


def agent_name(names: Sequence[str]) -> Any:
    """An agent-name field type: the ``enum`` of the run's agents."""
    values = tuple(dict.fromkeys(n for n in names if n))
    if not values:
        raise ValueError("agent_name needs at least one agent")
    return Literal[values]  # type: ignore[valid-type]


def short_text(max_chars: int = 300) -> Any:
    """A free-text field whose schema says ``maxLength`` (a grammar-constrained model stops there) while validation
    accepts longer text (a model that ignores the schema is not sent back for repair over a long reason)."""
    return Annotated[str, Field(json_schema_extra={"maxLength": max_chars})]


def output_model(name: str, /, **fields: Any) -> type[BaseModel]:
    """Build a stage's output model; a field is a type or ``(type, default)``.

    Example: ``output_model("Answer", agent=agent_name(agents), step=step_index(0, n - 1), reason=str)``.
    Extra keys in the model's answer are ignored (tolerant); the schema sent to the model forbids them.
    """
    spec = {k: (v if isinstance(v, tuple) else (v, ...)) for k, v in fields.items()}
    return create_model(name, __config__=ConfigDict(extra="ignore"), **spec)


def json_schema_for(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema, inlined (no ``$ref``), strict: every property required, no extra properties."""
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].split("/")[-1]])
            out = {k: walk(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
                out["additionalProperties"] = False
            if "const" in out and "enum" not in out:
                out["enum"] = [out.pop("const")]
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(raw)


# ------------------------------------------------------------------------------- answers fitted to a budget

#: The shortest string and the fewest list items :func:`fit_schema` leaves (an answer keeps some substance).
_MIN_CHARS, _SOFT_MIN_CHARS, _DEFAULT_CHARS, _DEFAULT_ITEMS = 16, 48, 200, 8
#: An integer range this small becomes an ``enum`` (llama.cpp's schema converter ignores minimum / maximum).
_MAX_RANGE_ENUM = 256
#: a bounded number becomes one of this many + 1 evenly spaced values (0.0, 0.1 … 1.0 for a confidence)
_NUMBER_STEPS = 10


def answer_tokens(schema: Mapping[str, Any], chars_per_token: float = 3.0) -> int | None:
    """The most tokens an answer conforming to ``schema`` can take (estimated; None when unbounded).

    Strings count ``maxLength / chars_per_token`` plus quotes, lists ``maxItems`` items, keys and punctuation about
    one token per three characters; a string without ``maxLength`` or a list without ``maxItems`` is unbounded.
    """

    def cost(node: Any) -> float | None:
        if not isinstance(node, Mapping):
            return 1.0
        if "enum" in node:
            return 1.0 + max((len(json.dumps(v)) / chars_per_token for v in node["enum"]), default=1.0)
        alts = node.get("anyOf") or node.get("oneOf")
        if alts:
            costs = [cost(a) for a in alts]
            return None if any(c is None for c in costs) else max(c for c in costs if c is not None)
        kind = node.get("type")
        if kind == "object":
            total = 2.0
            for key, sub in (node.get("properties") or {}).items():
                c = cost(sub)
                if c is None:
                    return None
                total += c + 1.0 + (len(key) + 3) / chars_per_token
            return total
        if kind == "array":
            n, item = node.get("maxItems"), cost(node.get("items", {}))
            return None if n is None or item is None else 2.0 + n * (item + 1.0)
        if kind == "string":
            n = node.get("maxLength")
            return None if n is None else 2.0 + n / chars_per_token
        if kind == "integer":
            hi = max(abs(node.get("maximum", 10**16)), abs(node.get("minimum", 0)))
            return 1.0 + len(str(hi))
        if kind == "number":
            return 17.0
        return 2.0  # boolean, null

    value = cost(schema)
    return None if value is None else math.ceil(value)


def fit_schema(
    schema: Mapping[str, Any], budget_tokens: int, chars_per_token: float = 3.0
) -> tuple[dict[str, Any], int]:
    """A copy of ``schema`` whose longest conforming answer fits ``budget_tokens``; returns it and that bound.

    For a backend that enforces the schema as a grammar (llama.cpp) and has a small output cap: a weak model fills
    every free string and list to the limit, and a JSON answer cut at ``max_tokens`` is lost. So every string gets a
    ``maxLength`` and every list a ``maxItems`` (defaults 200 / 8), then strings are shortened (to 48 characters)
    and the largest lists lose items (down to 1), then strings go down to 16 characters, until the estimate
    (:func:`answer_tokens`) fits the budget. Small integer ranges become an ``enum`` (the grammar enforces enums,
    not ``minimum`` / ``maximum``), and so do bounded numbers (:func:`number_grid`: a confidence in [0, 1] is one of
    0.0, 0.1 … 1.0 — SmolLM2 otherwise writes ``"confidence": 100.0`` or ``1.25``, which fails validation and costs a
    repair call, and after the repairs a lost answer). Validation stays with the stage's pydantic model, which
    accepts longer text.
    """
    fitted: dict[str, Any] = json.loads(json.dumps(schema))
    strings: list[dict[str, Any]] = []
    arrays: list[dict[str, Any]] = []

    def prepare(node: Any) -> None:
        if isinstance(node, list):
            for v in node:
                prepare(v)
            return
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        if kind == "string" and "enum" not in node and "pattern" not in node:
            node["maxLength"] = int(node.get("maxLength") or _DEFAULT_CHARS)
            strings.append(node)
        elif kind == "array":
            node["maxItems"] = int(node.get("maxItems") or _DEFAULT_ITEMS)
            arrays.append(node)
        elif kind == "integer" and "enum" not in node and "minimum" in node and "maximum" in node:
            lo, hi = int(node["minimum"]), int(node["maximum"])
            if 0 <= hi - lo < _MAX_RANGE_ENUM:
                node["enum"] = list(range(lo, hi + 1))
        elif kind == "number" and "enum" not in node and "minimum" in node and "maximum" in node:
            node["enum"] = number_grid(float(node["minimum"]), float(node["maximum"]))
        for v in node.values():
            prepare(v)

    prepare(fitted)

    def bound() -> int:
        return answer_tokens(fitted, chars_per_token) or 0

    for _ in range(500):
        if bound() <= budget_tokens:
            break
        long = [s for s in strings if s["maxLength"] > _SOFT_MIN_CHARS]
        if long:
            for s in long:
                s["maxLength"] = max(_SOFT_MIN_CHARS, int(s["maxLength"] * 0.8))
            continue
        wide = [a for a in arrays if a["maxItems"] > 1 and a.get("minItems", 0) < a["maxItems"]]
        if wide:
            widest = max(wide, key=lambda a: (a["maxItems"] * (answer_tokens(a["items"], chars_per_token) or 1)))
            widest["maxItems"] -= 1
            continue
        short = [s for s in strings if s["maxLength"] > _MIN_CHARS]
        if not short:
            break
        for s in short:
            s["maxLength"] = max(_MIN_CHARS, int(s["maxLength"] * 0.8))
    return fitted, bound()


def number_grid(lo: float, hi: float, steps: int = _NUMBER_STEPS) -> list[float]:
    """``steps + 1`` evenly spaced values from ``lo`` to ``hi`` (rounded to 6 places): the ``enum`` a bounded
    ``number`` becomes for a grammar that enforces enums but not bounds (:func:`fit_schema`)."""
    if not hi > lo:
        return [lo]
    return [round(lo + (hi - lo) * i / steps, 6) for i in range(steps + 1)]


def answer_template(schema: Mapping[str, Any]) -> str:
    """A short picture of the answer ``schema`` asks for: ``{"step": 2|5, "reason": "<text, ≤ 80 characters>"}``.

    For a backend that enforces the schema as a grammar, this replaces the full JSON schema in the prompt
    (:func:`compact_schema_in_messages`): the grammar already forbids everything else, and the schema's JSON costs
    a small model hundreds of prompt tokens per call.
    """

    def render(node: Any) -> str:
        if not isinstance(node, Mapping):
            return "<value>"
        if "enum" in node:
            values = list(node["enum"])
            if len(values) > 6 and all(type(v) is int for v in values) and values == list(range(values[0],
                                                                                                values[-1] + 1)):
                return f"<integer {values[0]}–{values[-1]}>"
            if len(values) > 6 and all(type(v) is float for v in values) and values == number_grid(
                    values[0], values[-1], len(values) - 1):
                return f"<number {values[0]:g}–{values[-1]:g}, in steps of {values[1] - values[0]:g}>"
            return "|".join(json.dumps(v, ensure_ascii=False) for v in values)
        alts = node.get("anyOf") or node.get("oneOf")
        if alts:
            return " or ".join(render(a) for a in alts)
        kind = node.get("type")
        if kind == "object":
            props = node.get("properties") or {}
            return "{" + ", ".join(f"{json.dumps(k)}: {render(v)}" for k, v in props.items()) + "}"
        if kind == "array":
            n = node.get("maxItems")
            return f"[{render(node.get('items', {}))}, …{f' at most {n}' if n else ''}]"
        if kind == "string":
            n = node.get("maxLength")
            return f'"<text{f", ≤ {n} characters" if n else ""}>"'
        if kind == "integer":
            lo, hi = node.get("minimum"), node.get("maximum")
            return f"<integer {lo}–{hi}>" if lo is not None and hi is not None else "<integer>"
        if kind == "number":
            return "<number>"
        if kind == "boolean":
            return "true|false"
        return "null" if kind == "null" else "<value>"

    return render(schema)


def compact_schema_in_messages(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any], shown: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """``messages`` with every copy of ``schema``'s compact JSON (what the stages show, see ``schema_text``)
    replaced by :func:`answer_template` of ``shown`` (default: ``schema``)."""
    text = json.dumps(schema, separators=(",", ":"))
    short = answer_template(shown if shown is not None else schema)
    return [{**m, "content": m["content"].replace(text, short)} for m in messages]
