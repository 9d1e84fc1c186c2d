"""Family ``superseded_value``: a number taken from an observation a later observation superseded (MAST FM-2.5,
the newer input ignored).

A step states or passes a number whose origin is an observation — a tool's answer, a code output — although a
LATER observation of the same thing, which the step could read, says otherwise: the stock level read before a
reservation changed it, the price fetched before the update, the status polled once too early. The value is copied
faithfully, so no comparison of numbers sees it; its source is stale. The finding's evidence is the later number
(``superseded_by``), which repair's correction puts in its place.

The rule, from kinds, edges and values only: the step's number comes from result step ``j`` (provenance's origin);
a later result ``k`` (after ``j``, before the step, one the step depended on when the run recorded dependencies)
answers the same query — the same tool called again with the same arguments: the status polled again, the stock
read again — and has an entry with the same labels holding a different number; and the step does not use that newer number too (a step that uses both compares
them: a difference, a check). Or a later result of ANOTHER query announces the change in words (:data:`_ANNOUNCES`:
revised, replaces, changed, updated, corrected …): "price changed from 19.90 to 17.40" supersedes 19.90 with 17.40;
"GBP/EUR revised at 11:30: 1.1574 (replaces the 09:00 fixing)" supersedes the fixing's 1.1612 — an entry sharing two
labels with the source's, holding a number of the same magnitude (within half of it).
"""

from __future__ import annotations

import json
import re

from causaltrace.attribution.findings._common import evidence, finding, related_source
from causaltrace.attribution.findings.entries import entries_of
from causaltrace.attribution.findings.retyped_lists import list_literals
from causaltrace.attribution.stages.dependencies import DependencyGraph
from causaltrace.attribution.stages.loops import is_answer_step
from causaltrace.attribution.stages.provenance_record import Provenance
from causaltrace.attribution.stages.values import number_key
from causaltrace.attribution.stages.view import content_of
from causaltrace.schema import Finding, Run, Step

__all__ = ["detect_superseded_values"]

_RESULTS = ("tool_response", "code_execution")
_REJECTS = re.compile(r"\b(?:REJECT(?:ED)?|not approved|incorrect|is wrong)\b", re.IGNORECASE)
#: words by which a result announces that it supersedes an earlier value
_ANNOUNCES = re.compile(r"\b(?:revis|replac|supersed|updat|correct|chang|amend|restat|adjust)\w*", re.IGNORECASE)
_FROM_TO = re.compile(r"\bfrom\s+\D{0,4}?(\d[\d,]*(?:\.\d+)?)\s*[A-Za-z%€$£]{0,5}\s+to\s+\D{0,4}?(\d[\d,]*(?:\.\d+)?)")
_SKIPPED = (*_RESULTS, "llm_response", "task", "final_answer")  # a final answer returns a step it answers


def _label_of(step: Step, number: str) -> frozenset[str] | None:
    """The labels of the one entry of ``step``'s observation that holds ``number`` (None: none or several)."""
    holding = [labels for labels, numbers in entries_of(content_of(step)) if number in numbers]
    return holding[0] if len(holding) == 1 else None


def _query(calls: dict[str, Step], result: Step) -> tuple[str | None, str] | None:
    """What a result answers: its call's tool and arguments (None for a result with no call: code output)."""
    call = next((calls[d] for d in result.deps_of_kind("tool_result_of") if d in calls), None)
    if call is None:
        return None
    return call.tool_name, json.dumps(call.arguments or {}, sort_keys=True, default=str)


def _newer(run: Run, graph: DependencyGraph | None, calls: dict[str, Step], i: int, j: int, used: str,
           labels: frozenset[str]) -> tuple[int, str] | None:
    """The latest result after ``j`` and before ``i`` that answers the SAME query (the same tool called with the
    same arguments) and says another number for the same entry."""
    query = _query(calls, run.step_at(j))
    if query is None:
        return None
    for k in range(i - 1, j, -1):
        later = run.step_at(k)
        if later.kind not in _RESULTS or not related_source(run, graph, i, k) or _query(calls, later) != query:
            continue
        for entry, numbers in entries_of(content_of(later)):
            if entry == labels and numbers and used not in numbers:
                return k, numbers[0]
    return None


def _announced(run: Run, graph: DependencyGraph | None, i: int, j: int, used: str,
               labels: frozenset[str] | None) -> tuple[int, str] | None:
    """The latest result after ``j`` and before ``i`` (one ``i`` could read) that announces a change of ``used``
    (module docstring): "from <used> to <new>", or an entry sharing two labels with the source's holding a number of
    the same magnitude."""
    for k in range(i - 1, j, -1):
        later = run.step_at(k)
        if later.kind not in _RESULTS or not related_source(run, graph, i, k):
            continue
        text = content_of(later)
        if not _ANNOUNCES.search(text):
            continue
        for m in _FROM_TO.finditer(text):
            if number_key(m.group(1)) == used and (new := number_key(m.group(2))) not in (None, used):
                return k, new
        if (series := _corrected_series(run.step_at(j), text, used)) is not None:
            return k, series
        if labels and (base := float(used)):
            for entry, numbers in entries_of(text):
                if len(entry & labels) < 2:
                    continue
                for raw in numbers:
                    new = number_key(raw)
                    if new is not None and new != used and abs(float(new) - base) < abs(base) / 2 and (
                            "." in raw) == ("." in used):
                        return k, new
    return None


def _corrected_series(source: Step, text: str, used: str) -> str | None:
    """The number at ``used``'s place in a list of the same length that an announcing result gives ("the last five
    readings corrected to [20.6, 21.1, ...]" after ``[21.4, 21.9, ...]``), when the source's list holds ``used``."""
    for _, old in list_literals(content_of(source)):
        keys = [number_key(x) for x in old]
        if used not in keys:
            continue
        for _, new in list_literals(text):
            if len(new) == len(old) and new != old:
                return number_key(new[keys.index(used)])
    return None


def _rejected(run: Run, i: int, j: int, used: str) -> tuple[int, str] | None:
    """A later message of another agent, before step ``i``, that REJECTS the message ``j`` the number came from and
    names the number — a critic's "REJECT: 41 counts the 4 open bugs too; fixed is 37" — with the value it should be
    (the rejection's other number of the same magnitude)."""
    agent = run.step_at(j).agent
    for k in range(j + 1, i):
        later = run.step_at(k)
        if later.kind != "message" or later.agent == agent or not _REJECTS.search(content_of(later)):
            continue
        numbers = [number_key(m) for m in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?!\w|\.\d)", content_of(later))]
        if used in numbers:
            base = float(used)
            other = next((n for n in numbers if n not in (None, used) and base and abs(float(n) - base) < base / 2),
                         None)
            if other is not None:
                return k, other
    return None


def detect_superseded_values(run: Run, prov: Provenance, graph: DependencyGraph | None) -> list[Finding]:
    """One finding per number a step took from an observation a later observation of the same thing superseded
    (module docstring)."""
    by_index = {s.index: s for s in run.steps}
    calls = {s.step_id: s for s in run.steps if s.kind == "tool_call"}
    out: list[Finding] = []
    rejected_uses: set[tuple[int, str]] = set()
    for i, origins in prov.origins.items():
        step = by_index.get(i)
        if step is None or step.kind in _SKIPPED or is_answer_step(step):
            continue
        numbers_used = {k.split(":", 1)[1] for k in origins if k.startswith("number:")}
        for key, j in origins.items():
            source = by_index.get(j)
            if not key.startswith("number:") or source is None:
                continue
            used = key.split(":", 1)[1]
            if source.kind == "message":  # a draft a critic rejected, used after the rejection
                newer = _rejected(run, i, j, used)
                if newer is not None and newer[1] not in numbers_used and (j, used) not in rejected_uses:
                    rejected_uses.add((j, used))  # the first step to take it decided; later ones carry it
                    k, value = newer
                    out.append(finding(run, "superseded_value", i,
                                       f"step {i} uses {used} from step {j}, which step {k} rejected ({value}): a "
                                       f"rejected value", [evidence(run, j, "source", used),
                                                           evidence(run, k, "superseded_by", value),
                                                           evidence(run, i, "changed", used)]))
                continue
            if source.kind not in _RESULTS:
                continue
            labels = _label_of(source, used)
            newer = _newer(run, graph, calls, i, j, used, labels) if labels else None
            if newer is None:
                newer = _announced(run, graph, i, j, used, labels)
            if newer is None or newer[1] in numbers_used:
                continue
            k, value = newer
            items = [evidence(run, j, "source", used), evidence(run, k, "superseded_by", value),
                     evidence(run, i, "changed", used)]
            out.append(finding(run, "superseded_value", i,
                               f"step {i} uses {used} from step {j}, which the later step {k} superseded "
                               f"({', '.join(sorted(labels or ())) or 'announced'}: {value}): a stale value", items))
    return out
