"""How small a correction is: CausalFlow's position-wise token similarity (paper Eq. 2) and an edit-distance variant.

CausalFlow (SEEDS.md §4.3.5) scores a repair by comparing the original and the modified text: lower-case, split on
whitespace, ``m`` = position-wise equal tokens over ``min(|x|, |y|)``, ``L = max(|x|, |y|)``,
``score = (m / L) · (1 − 0.5 · ||x| − |y|| / L)`` clamped to [0, 1]; identical texts score 1.0 and an empty original
scores 1 only if the modified text is empty too. The paper's ablation (Tables 8 and 9) found a token edit distance
more robust in browse domains: :func:`edit_distance_minimality` is that variant, ``1 − lev(x, y) / L``.
Structured replacements (tool arguments, tool calls) are compared as canonical JSON text.
"""

from __future__ import annotations

import json
from typing import Any, Literal

__all__ = ["edit_distance_minimality", "minimality", "positional_minimality", "step_text"]


def step_text(value: Any) -> str:
    """The text a replacement is compared by: itself for a str, canonical JSON for anything structured."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _tokens(text: str) -> list[str]:
    return text.lower().split()


def positional_minimality(original: Any, modified: Any) -> float:
    """CausalFlow's Eq. 2 minimality of a modification (1.0 = unchanged)."""
    x, y = _tokens(step_text(original)), _tokens(step_text(modified))
    if not x:
        return 1.0 if not y else 0.0
    if x == y:
        return 1.0
    longest = max(len(x), len(y))
    matches = sum(1 for a, b in zip(x, y, strict=False) if a == b)
    score = (matches / longest) * (1 - 0.5 * abs(len(x) - len(y)) / longest)
    return max(0.0, min(1.0, score))


def _levenshtein(a: list[str], b: list[str]) -> int:
    previous = list(range(len(b) + 1))
    for i, token_a in enumerate(a, start=1):
        current = [i]
        for j, token_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (token_a != token_b)))
        previous = current
    return previous[-1]


def edit_distance_minimality(original: Any, modified: Any) -> float:
    """``1 − token edit distance / max length`` (1.0 = unchanged); the paper's more robust alternative."""
    x, y = _tokens(step_text(original)), _tokens(step_text(modified))
    if not x and not y:
        return 1.0
    return 1.0 - _levenshtein(x, y) / max(len(x), len(y))


def minimality(original: Any, modified: Any, *, kind: Literal["positional", "edit"] = "positional") -> float:
    """The minimality of a modification under the chosen measure."""
    if kind == "edit":
        return edit_distance_minimality(original, modified)
    return positional_minimality(original, modified)
