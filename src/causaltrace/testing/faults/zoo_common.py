"""What the failure zoo's teams of both frameworks share (issue 20 item 2): the unit table of the plan-word teams,
the number format of their tools, and the keyed outage that makes a lookup tool fail for one key.

Framework-free on purpose: :mod:`.zoo_smolagents` and :mod:`.zoo_autogen` (and their ``_more`` / ``_blind``
siblings) import it without pulling in the other framework. The request readers of each framework live with its
other readers, in :mod:`.teams_smolagents` and :mod:`.teams_autogen`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable

__all__ = ["FACTORS", "fmt", "outage"]

#: unit → factor to the target unit of its family (kilograms, kilometres, litres)
FACTORS = {"pounds": 0.4536, "ounces": 0.02835, "miles": 1.609, "feet": 0.0003048, "gallons": 3.785,
           "quarts": 0.9464}


def fmt(value: float) -> str:
    """``value`` rounded to 2 decimals, without trailing zeros (``12.5``, ``3``)."""
    return f"{round(value, 2):g}"


def outage(key: Hashable, calls: int = 1) -> Callable[[Hashable], bool]:
    """A service that is down for ``key``: the check it returns counts every call by its key and is True for the
    first ``calls`` calls with ``key`` (the tool then raises its timeout), False otherwise.

    One check per fresh team, like the flaky tools' first-call failure: the teams are built anew for every run. And
    like theirs, the outage follows the RUN, not the team object: a replay builds a fresh team and serves the
    recorded calls before its edit without reaching the tool, so the outage also counts the failures for ``key`` the
    calling agent's memory (smolagents) or model context (AutoGen) already holds (:func:`_failures_seen`) — the
    recorded timeout among them — and a replay's first live call of ``key`` is the run's next call, as it was for the
    fixed twin. While recording, every earlier failure for ``key`` is one of this check's own calls, so the count is
    the same as before.
    """
    tries: Counter[Hashable] = Counter()

    def down(asked: Hashable) -> bool:
        tries[asked] += 1
        if asked != key or tries[asked] > calls:
            return False
        return max(tries[asked], _failures_seen(asked) + 1) <= calls

    return down


#: what a flaky tool's first-call failure says (teams_smolagents / teams_autogen ``TRANSIENT``): not the outage's
_TRANSIENT = "service temporarily unavailable"


def _failures_seen(key: Hashable) -> int:
    """How many failures naming every part of ``key`` (as whole words) the calling agent's memory or model context
    holds, a flaky tool's transient failure aside: found through the flaky tool's state (``state["seen_by"]`` of a
    smolagents tool, ``state["context"]`` of an AutoGen one) on the call stack; 0 when there is none."""
    import re
    import sys

    parts = [str(p) for p in (key if isinstance(key, tuple) else (key,))]
    names = [re.compile(rf"(?<![\w]){re.escape(p)}(?![\w])") for p in parts]
    frame, texts = sys._getframe(1), None
    for _ in range(12):
        if frame is None:
            break
        state = frame.f_locals.get("state")
        if isinstance(state, dict) and ("seen_by" in state or "context" in state):
            texts = _failure_texts(state)
            break
        frame = frame.f_back
    return sum(1 for t in texts or () if _TRANSIENT not in t and all(n.search(t) for n in names))


def _failure_texts(state: dict) -> list[str]:
    """The failures the agents bound to a flaky tool's ``state`` have seen: smolagents memory steps' errors, AutoGen
    tool results marked as errors."""
    out = []
    for agent, _ in state.get("seen_by") or ():
        out += [str(step.error) for step in getattr(getattr(agent, "memory", None), "steps", ()) or ()
                if getattr(step, "error", None) is not None]
    context = state.get("context")
    for message in getattr(context, "_messages", None) or ():
        out += [str(r.content) for r in getattr(message, "content", ()) or ()
                if getattr(r, "is_error", False) and isinstance(getattr(r, "content", None), str)]
    return out
