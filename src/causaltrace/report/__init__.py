"""The HTML report of a run: one self-contained, offline file (inline CSS, inline SVG, a little vanilla JS).

It shows the step graph as a picture (agents as lanes, steps left → right by index, dependency edges coloured by
kind, the decisive step and the propagation path highlighted, candidates marked with their rank), a timeline, the
diagnosis with its evidence and ranked candidates, the replays tried with their outcomes, the repair diff, the run
header and a full step table. Everything taken from the run is HTML-escaped (step content is untrusted) and nothing
is loaded from the network. Rendering is deterministic: the same inputs give the same bytes.

Usage::

    from causaltrace.report import write_report
    write_report(run, "report.html", diagnosis=diagnosis, pairs=store.repair_pairs(run_id=run.run_id))

or ``causaltrace report RUN_ID --html report.html``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from causaltrace.schema import Diagnosis, RepairPair, ReplayResult, Run

__all__ = ["render_html", "write_report"]


def render_html(
    run: Run,
    *,
    diagnosis: Diagnosis | None = None,
    replays: Iterable[ReplayResult | dict[str, Any]] = (),
    pairs: Iterable[RepairPair] = (),
) -> str:
    """The report of ``run`` as one HTML document.

    ``replays``: the replays tried (ReplayResults, or dicts with ``step_id``, ``description``, ``replacement``,
    ``flipped``, ``outcome``/``status``, ``replay_run_id``); when empty, ``diagnosis.artifacts["replays"]`` is used
    if present. ``pairs``: the run's repair pairs, shown as a diff of the rejected and the chosen step.
    """
    from causaltrace.report._page import render_page

    return render_page(run, diagnosis, replays, pairs, version=_version())


def _version() -> str:
    """The installed causaltrace's version, from its distribution metadata (the report may not import the root
    package: ARCHITECTURE's import table)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("causaltrace")
    except PackageNotFoundError:
        return "(version unknown)"


def write_report(
    run: Run,
    path: str | Path,
    *,
    diagnosis: Diagnosis | None = None,
    replays: Iterable[ReplayResult | dict[str, Any]] = (),
    pairs: Iterable[RepairPair] = (),
) -> Path:
    """Write :func:`render_html` to ``path`` (UTF-8, parent folders created) and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(run, diagnosis=diagnosis, replays=replays, pairs=pairs), encoding="utf-8")
    return out
