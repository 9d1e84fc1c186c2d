"""Derived numbers (:mod:`.provenance`'s docstring, 3): a number that is an arithmetic result of numbers seen
before — ``a ± b``, ``a × b``, ``a ÷ b``, the sum or mean of one step's numbers, or of a run of numbers fetched one
by one — was computed by the step that states it, from its operands' introducers; it is neither introduced from
nothing nor a restatement that changed a value.

Split from :mod:`.provenance`: the searches are pure functions of numbers and their introducers (bounded, linear
in the pool), apart from the walk that decides when to ask them.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["capped_total", "derivation", "group_derivation", "priced_total", "run_totals", "scaled_derivation"]

#: the task's introducer index (``provenance_record.TASK``): two of the task's own numbers combine ("from 14:00, for
#: two hours" gives 16), where two numbers one step introduced are no evidence of a computation by a later one
_TASK = -1


def derivation(x: float, pool: dict[float, int], exact: dict[float, int]) -> list[int] | None:
    """The introducers of two numbers of ``pool`` whose sum, difference, product or quotient is ``x`` (linear in the
    pool: each number's partner is looked up in ``exact``, the pool by rounded value). Neither operand may be 0 or
    1: every number is some other number plus one (a list's "step 1" beside the task's 25 "derived" the 26 of a copy
    slip, hiding it — issue 32), so an increment, a product by one or a sum with zero is no evidence of a
    computation."""
    for a, i in pool.items():
        if a in (0.0, 1.0):
            continue
        for b in (x - a, a - x, x + a, x / a if a else None, a / x if a and x else None, x * a):
            if b is None or b in (0.0, 1.0):
                continue
            j = exact.get(round(b, 6))
            if j is not None and (j != i or b == a or i == _TASK):
                return [i, j]
    return None


def scaled_derivation(x: float, pool: dict[float, int], exact: dict[float, int], counts: Iterable[float]
                      ) -> list[int] | None:
    """The introducers of ``a ± k × b`` (or ``k × b − a``) equal to ``x``, where ``k`` is one of ``counts`` — what the
    TASK counts ("stay 2 nights", "for 3 people": a whole number 2–100 with its noun; an operand of the task's
    arithmetic, "(17 + 25) * 3", counts nothing) — and ``a``, ``b`` numbers of ``pool`` other than 0, 1 and ``k``: a
    total of a fixed cost and a per-unit one (a flight plus 2 nights at 149 is 487). Only counted nouns scale: any
    number times any number would explain too much (a copy slip, 26 for 25, is 17 + 3 × 3)."""
    for k in list(counts)[:8]:
        for b, i in pool.items():
            if b in (0.0, 1.0, k):
                continue
            for a in (x - k * b, x + k * b, k * b - x):
                if a in (0.0, 1.0):
                    continue
                j = exact.get(round(a, 6))
                if j is not None:
                    return [j, i]
    return None


def priced_total(x: float, quantities: list[float], exact: dict[float, int]) -> list[int] | None:
    """The introducers of two unit prices whose costs over two of the task's quantities add up to ``x``:
    ``q1 × p1 + q2 × p2`` ("250 business cards and 40 posters": 250 × 0.38 a card + 40 × 5.20 a poster is 303) —
    a quote checked in one's head, each price from a list (a rate per 100 gives its per-unit price)."""
    qs = [q for q in quantities if q >= 2][:6]
    for q1 in qs:
        for p1, i in exact.items():
            if p1 in (0.0, 1.0):
                continue
            rest = x - q1 * p1
            if rest <= 0:
                continue
            for q2 in qs:
                if q2 != q1 and (j := exact.get(round(rest / q2, 6))) is not None:
                    return [i, j]
    return None


def capped_total(x: float, pool: list[tuple[float, int]], caps: list[float]) -> list[int] | None:
    """The introducers of a run of consecutive numbers of ``pool`` whose total, each counted at most a stated cap, is
    ``x``: meals of 38.50, 52.00 and 31.20 reimbursed "up to 40.00 per meal" total 109.70."""
    for cap in caps:
        for i in range(len(pool)):
            total = 0.0
            for j in range(i, len(pool)):
                total += min(pool[j][0], cap)
                if j > i and any(n > cap for n, _ in pool[i:j + 1]) and abs(total - x) < 0.005:
                    return [owner for _, owner in pool[i:j + 1]]
    return None


def group_derivation(x: float, groups: Iterable[tuple[int, list[float]]]) -> list[int] | None:
    for j, nums in groups:
        if len(nums) >= 2 and (abs(sum(nums) - x) < 1e-6 or round(sum(nums) / len(nums), 2) == round(x, 2)):
            return [j]
    return None


def run_totals(pool: list[tuple[float, int]]) -> dict[float, list[int]]:
    """The sums and means of every run of consecutive numbers of ``pool`` (the order they were first seen), by
    rounded value → their introducers: a total or average over the items fetched one by one."""
    out: dict[float, list[int]] = {}
    for i in range(len(pool)):
        total = 0.0
        for j in range(i, len(pool)):
            total += pool[j][0]
            if j > i:
                owners = [owner for _, owner in pool[i:j + 1]]
                mean = total / (j - i + 1)
                out.setdefault(round(total, 6), owners)
                out.setdefault(round(mean, 6), owners)
                out.setdefault(round(mean, 2), owners)
    return out
