"""Fabricated data (issue 20 item 4, "the step that first introduced it"): an agent that invents what it was asked
to obtain — a simulated dataset, hypothetical figures, placeholder credentials, an assumed file.

When a task needs facts from the world (a record, a page, a file), the decisive error of a failed run is often the
first step that stopped trying to obtain them and made them up instead; every later step computes faithfully on the
invented values. Such a step says so in its own words — code that *simulates* data or calls an API with
``YOUR_API_KEY``, text that offers *hypothetical* figures "for demonstration", or *assumes* a file that nobody
provided — and that marker is the evidence: it is the author of the values, not their carrier.

The rule, deterministic:

* a step is **marked** when the agent's own decision — its text, or the code it wrote — uses one of the
  :data:`MARKERS`: invention (simulated / hypothetical / mock / dummy / sample, example or synthetic data /
  made-up values / for demonstration / for illustration / placeholder / "replace with actual" / ``YOUR_API_KEY`` /
  assuming a file or dataset) or knowledge standing in for a lookup (from memory / from what I know / based on
  my training data / as of my knowledge cutoff / typical or representative values / an approximate, assumed,
  or guessed rate, price, fare or figure standing in for the one a tool gives; not "an educated guess" or "a
  rough estimate", which planners write of what they will derive: Magentic-One's facts sheet has a section of
  them);
* execution outputs (a terminal's, a tool's) are never marked: they report what code did, they decide nothing;
* steps that paste an observed page are not judged either (a browser agent's reply quoting a site's
  ``placeholder`` attribute is prose it read, not a decision): a step whose speaker observed the web — its text
  carries a screenshot / viewport / page-address preamble — is skipped by :func:`_pastes_a_page`;
* only the FIRST marked step counts: the later ones carry what it invented; a marked thought (``reasoning``)
  counts for the tool call the same model reply made (the code that builds the data: the action, and what an
  intervention edits).

Data: the markers are the words agents use when they fabricate, listed by reasoning about what such code and text
say; checked on Who&When's dev half only (the first marked step is the labelled one in 6 of the 9
Algorithm-Generated logs whose opening did not drift; in Hand-Crafted, browser pages were the only other source of
marks, hence the page rule).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from causaltrace.attribution.context import DiagnosisContext, Stage
from causaltrace.attribution.stages.view import candidate_steps, content_of, is_execution_output
from causaltrace.schema import Run, Step

__all__ = ["MARKERS", "Fabrication", "FabricationResult", "FabricationStage", "find_fabrication"]

#: what a step that invents its data says (case-insensitive, whole words)
MARKERS = re.compile(
    r"\b(simulat(?:e|ed|es|ing|ion)|hypothetical(?:ly)?|mock(?:ed)? (?:data|dataset|response|values?)|dummy "
    r"(?:data|dataset|values?)|(?:sample|example|fake|synthetic) (?:data|dataset|values?)|synthetic (?:\w+ )?"
    r"(?:series|figures?|numbers?|records?|readings?)|(?:made-up|invented|fabricated|fictitious|fictional) "
    r"(?:data|values?|figures?|numbers?)|for demonstration(?: purposes)?|for illustrati(?:on|ve) purposes|"
    r"placeholder(?:s| values?| data)?|replace (?:this |it |them )?with (?:the )?actual|your_api_key|"
    r"assum(?:e|ing) (?:that )?(?:the |a )?(?:file|dataset|data file|csv)|from what i (?:know|recall|remember)|"
    r"(?:from|based on|according to) my (?:training(?: data)?|(?:general )?knowledge|memory)|from memory|"
    r"as of my (?:knowledge |training )?cut-?off|(?:estimated|representative|typical) (?:values|figures)|"
    r"(?:approximate|assumed|guessed) (?:[\w/]+ ){0,2}(?:rates?|prices?|fares?|values?|figures?|costs?))\b",
    re.IGNORECASE,
)
_PAGE = re.compile(r"\b(screenshot|viewport|web ?page|https?://)", re.IGNORECASE)


@dataclass(frozen=True)
class Fabrication:
    """The first step that made its data up, and the words that say so."""

    index: int
    step_id: str
    markers: tuple[str, ...]
    #: the agent that made the data up
    agent: str = ""

    def describe(self) -> str:
        said = ", ".join(repr(m) for m in self.markers)
        return (f"makes up its data instead of obtaining it ({said}): the first step to do so, the author of the "
                "invented values later steps carry")

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "step_id": self.step_id, "markers": list(self.markers)}


def _decision_text(step: Step) -> str:
    code = step.inputs.get("code") if isinstance(step.inputs, dict) else None
    args = step.arguments or {} if step.kind == "tool_call" else {}
    return " ".join(str(x) for x in (content_of(step), code or "", *args.values()) if x)


def _pastes_a_page(text: str) -> bool:
    """A step that quotes a page it observed (a browser agent's reply): two or more page markers."""
    return len(_PAGE.findall(text[:2000])) >= 2


def find_fabrication(run: Run) -> Fabrication | None:
    """The first step that made its data up (module docstring), else None."""
    task = run.task or ""
    asked = {m.lower() for m in MARKERS.findall(task)}
    for step in candidate_steps(run):
        if is_execution_output(step):
            continue
        text = _decision_text(step)
        found = [m for m in MARKERS.findall(text) if m.lower() not in asked]
        if not found or _pastes_a_page(text):
            continue
        markers = tuple(dict.fromkeys(m.lower() for m in found))[:3]
        acting = _action_of_reply(run, step)
        return Fabrication(acting.index, acting.step_id, markers, agent=step.agent)
    return None


def _action_of_reply(run: Run, step: Step) -> Step:
    """The action a marked thought belongs to: a ``reasoning`` step and the tool call (the code) produced by the same
    model reply are one decision, and the action is what made the data — what an intervention edits; any other
    step is its own action."""
    if step.kind != "reasoning":
        return step
    replies = {d.step_id for d in step.depends_on if d.kind == "produced_by"}
    if not replies:
        return step
    for other in run.steps:
        if other.index > step.index and other.kind == "tool_call" and any(
                d.kind == "produced_by" and d.step_id in replies for d in other.depends_on):
            return other
    return step


@dataclass(frozen=True)
class FabricationResult:
    """The stage's artifact: the first fabricating step, or none."""

    fabrication: Fabrication | None

    def to_json(self) -> dict[str, Any]:
        return {"fabrication": self.fabrication.to_json() if self.fabrication is not None else None}


class FabricationStage(Stage[FabricationResult]):
    """Stage ``fabrication`` (deterministic): the first step that made its data up (module docstring)."""

    stage_id: ClassVar[str] = "fabrication"

    async def run(self, ctx: DiagnosisContext) -> FabricationResult:
        return FabricationResult(find_fabrication(ctx.run))

    def skipped(self, ctx: DiagnosisContext) -> FabricationResult:
        return FabricationResult(None)
