"""Tolerant parsing of a model's answer (split from :mod:`.judge`).

:func:`extract_json` accepts markdown fences, text around the object, raw control characters inside strings
(llama.cpp's JSON grammar lets newlines through) and truncated JSON (open strings / brackets are closed).
:func:`parse_answer` validates against the stage's output model, matching enum values leniently (case, surrounding
whitespace, a speaker suffix such as ``"Orchestrator (thought)"`` → ``"Orchestrator"``), and tries the stage's
``fallback`` parser for a plain-text format; it says why when nothing validates (the judge's repair message).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["Fallback", "extract_json", "parse_answer"]

#: A stage's parser for a plain-text answer format: the answer's fields, or None when it does not apply.
Fallback = Callable[[str], Mapping[str, Any] | None]

_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\r?\n?(.*?)(?:```|$)", re.DOTALL)


def extract_json(text: str) -> Any:
    """Parse the JSON value in a model's answer: fenced, surrounded by prose, or truncated. ValueError if none.

    An answer nested deeper than the decoder's recursion limit (``"[" * 50000``) is a ValueError saying so, never a
    RecursionError: a model's output must not crash the diagnosis that asked for it.
    """
    candidates: list[str] = []
    stripped = text.strip()
    if stripped:
        candidates.append(stripped)
    candidates.extend(m.group(1).strip() for m in _FENCE.finditer(text))
    # strict=False: control characters (raw newlines) inside strings are accepted — llama.cpp's JSON grammar lets
    # them through, and a JSON answer must not be lost over them
    decoder = json.JSONDecoder(strict=False)
    too_deep = False
    for attempt in _attempts(candidates):
        try:
            return attempt(decoder)
        except ValueError:
            pass
        except RecursionError:
            too_deep = True
    if too_deep:
        raise ValueError("the answer's JSON is nested too deeply to parse")
    raise ValueError("no JSON object found in the answer")


def _attempts(candidates: list[str]) -> Iterator[Callable[[json.JSONDecoder], Any]]:
    """The decodings :func:`extract_json` tries, in order: each whole candidate, its first value, its repair."""
    for cand in candidates:
        yield lambda decoder, cand=cand: decoder.decode(cand)
    for cand in candidates:
        starts = sorted(p for p in (cand.find("{"), cand.find("[")) if p >= 0)
        for start in starts:
            yield lambda decoder, rest=cand[start:]: decoder.raw_decode(rest)[0]
        for start in starts:
            repaired = _close_truncated(cand[start:])
            if repaired is not None:
                yield lambda decoder, repaired=repaired: decoder.decode(repaired)


def _close_truncated(text: str) -> str | None:
    """Close what a truncated JSON text left open: a string, then dangling commas / keys, then brackets."""
    stack: list[str] = []
    in_string = escape = False
    for ch in text:
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
    if not stack and not in_string:
        return None
    out = text
    if in_string:
        if escape:
            out = out[:-1]
        out += '"'
    for _ in range(3):
        trimmed = out.rstrip()
        trimmed = re.sub(r",\s*$", "", trimmed)
        trimmed = re.sub(r'[{,]\s*"[^"]*"\s*:?\s*$', lambda m: m.group(0)[0] if m.group(0)[0] == "{" else "", trimmed)
        if trimmed == out:
            break
        out = trimmed
    return out + "".join(reversed(stack))


def _normalise_literals(model: type[BaseModel], data: Any) -> Any:
    """Map near-miss enum answers onto the allowed values (case, whitespace, ``"Agent (suffix)"``, ``"3"``)."""
    if not isinstance(data, dict):
        return data
    out = dict(data)
    for key, info in model.model_fields.items():
        if key not in out or get_origin(info.annotation) is not Literal:
            continue
        allowed = get_args(info.annotation)
        value = out[key]
        if all(isinstance(a, int) for a in allowed):
            with contextlib.suppress(TypeError, ValueError):
                out[key] = int(str(value).strip())
            continue
        if not isinstance(value, str):
            continue
        text = value.strip().strip("'\"`").strip()
        for form in (text, text.split(" (", 1)[0].strip()):
            hit = next((a for a in allowed if isinstance(a, str) and a.casefold() == form.casefold()), None)
            if hit is not None:
                out[key] = hit
                break
    return out


def parse_answer(
    text: str, output: type[BaseModel], fallback: Fallback | None
) -> tuple[BaseModel | None, str]:
    """Parse + validate ``text`` as ``output`` (module docstring); returns (model, "") or (None, why)."""
    errors: list[str] = []
    data: Any = None
    try:
        data = extract_json(text)
    except ValueError as exc:
        errors.append(str(exc))
    if isinstance(data, list) and len(data) == 1 and isinstance(data[0], dict):
        data = data[0]
    for candidate in (data, fallback(text) if fallback is not None else None):
        if candidate is None:
            continue
        for attempt in (candidate, _normalise_literals(output, candidate)):
            try:
                return output.model_validate(attempt), ""
            except ValidationError as exc:
                msgs = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in exc.errors()[:3]
                )
                errors.append(msgs)
    if not errors:
        errors.append("the answer is not a JSON object")
    return None, errors[-1]
