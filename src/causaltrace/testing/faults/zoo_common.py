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

    One check per fresh team, like the flaky tools' first-call failure: the teams are built anew for every run.
    """
    tries: Counter[Hashable] = Counter()

    def down(asked: Hashable) -> bool:
        tries[asked] += 1
        return asked == key and tries[asked] <= calls

    return down
