"""The helpers of counterfactual simulation that ``dcfa``'s LCE and ``graph``'s ``refine`` share (issue 18: a
stage-level module, so neither imports the other): the similarity S of a simulated outcome to the target outcome,
and :class:`Evaluation`, the ΔS record of one simulated candidate.

* **Similarity** (:class:`Similarity`): cosine of embeddings from an embedding model (``$CAUSALTRACE_EMBEDDING_MODEL``
  or the method's ``embedding_model`` option) through ``litellm.aembedding`` when configured; otherwise the
  **lexical fallback** (:func:`lexical_similarity`): cosine similarity of bag-of-words vectors (lowercased
  alphanumeric tokens, numbers kept). An embedding failure is a :class:`~causaltrace.exceptions.JudgeError`, so
  the Diagnosis is marked failed; the kill switch applies to embedding requests too.
* **ΔS** = S(after) − S(before), rounded to 3 decimals, with both outcomes and the simulation's reason
  (:class:`Evaluation`; ``refine``'s "before" is the run's actual outcome).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from causaltrace.attribution.judge import check_model_request_allowed, import_litellm
from causaltrace.exceptions import JudgeError

__all__ = ["EMBEDDING_ENV", "Evaluation", "Similarity", "lexical_similarity"]

#: The environment variable naming the embedding model of :class:`Similarity` (unset: the lexical fallback).
EMBEDDING_ENV = "CAUSALTRACE_EMBEDDING_MODEL"

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def lexical_similarity(a: str, b: str) -> float:
    """The lexical fallback: cosine similarity of bag-of-words vectors (lowercased alphanumeric tokens)."""
    ca, cb = Counter(_TOKEN.findall(a.casefold())), Counter(_TOKEN.findall(b.casefold()))
    if not ca or not cb:
        return 0.0
    dot = sum(v * cb[k] for k, v in ca.items())
    return dot / (math.sqrt(sum(v * v for v in ca.values())) * math.sqrt(sum(v * v for v in cb.values())))


class Similarity:
    """S(answer) = similarity to the target: an embedding model through litellm, else the lexical fallback."""

    def __init__(self, model: str | None) -> None:
        self.model = model
        self.kind = f"embedding:{model}" if model else "lexical (bag-of-words cosine)"
        self._cache: dict[str, list[float]] = {}
        self.embedding_calls = 0

    async def _embed(self, text: str) -> list[float]:
        text = " ".join(text.split()) or " "
        if text not in self._cache:
            assert self.model is not None
            check_model_request_allowed(None, self.model)
            litellm = import_litellm()
            try:
                response = await litellm.aembedding(model=self.model, input=[text])
            except Exception as exc:  # an embedding failure is a judge failure: the Diagnosis is marked failed
                raise JudgeError(f"embedding model {self.model!r} failed: {type(exc).__name__}: {exc}") from exc
            self.embedding_calls += 1
            item = response.data[0]
            self._cache[text] = list(item["embedding"] if isinstance(item, Mapping) else item.embedding)
        return self._cache[text]

    async def score(self, answer: str, target: str) -> float:
        if self.model is None:
            return lexical_similarity(answer, target)
        a, b = await self._embed(answer), await self._embed(target)
        na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
        return sum(x * y for x, y in zip(a, b, strict=False)) / (na * nb) if na and nb else 0.0


@dataclass
class Evaluation:
    """ΔS of one candidate and the simulation behind it."""

    step: int
    delta: float
    s_before: float
    s_after: float
    answer_before: str
    answer_after: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "delta_s": self.delta, "s_before": round(self.s_before, 4),
                "s_after": round(self.s_after, 4), "answer_before": self.answer_before,
                "answer_after": self.answer_after, "reason": self.reason}
