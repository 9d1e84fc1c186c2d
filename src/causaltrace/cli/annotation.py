"""``--annotate`` of ``diagnose`` and ``repair`` (issue 33 item 5): put the run's verdict into its trace.

On by default when a backend is configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_TRACES_ENDPOINT`` or
``CAUSALTRACE_PHOENIX_URL``: :func:`causaltrace.instrumentation.annotate.backend_configured`) and the run's spans
were exported (its steps have span ids), off otherwise;
``--annotate`` / ``--no-annotate`` decide explicitly. What it does is
:func:`causaltrace.instrumentation.annotate.annotate_verdict`; here it is said on stderr — one dim line when it
went through, ONE warning line when it did not (the command's exit code never changes for it).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from causaltrace.report.terminal import safe_text

__all__ = ["add_annotate_argument", "annotate_from_cli"]


def add_annotate_argument(p: argparse.ArgumentParser) -> None:
    """``--annotate`` / ``--no-annotate`` on a command that stores a verdict."""
    p.add_argument("--annotate", action=argparse.BooleanOptionalAction, default=None,
                   help="put the run's verdict into its trace: a 'decisive: #N …' span (OTLP) and, with "
                        "CAUSALTRACE_PHOENIX_URL, a Phoenix span annotation (default: on when an OTLP endpoint or "
                        "CAUSALTRACE_PHOENIX_URL is set)")


def annotate_from_cli(args: argparse.Namespace, run: Any, verdict: Any) -> None:
    """Annotate ``run``'s trace with ``verdict`` when ``--annotate`` asks (or a backend is configured and it was not
    switched off), and say how it went on stderr."""
    from causaltrace.instrumentation.annotate import annotate_verdict, backend_configured

    wanted = getattr(args, "annotate", None)
    if verdict is None or wanted is False or (wanted is None and not (backend_configured() and _exported(run))):
        return
    if not backend_configured():
        print("causaltrace: warning: --annotate: no backend configured (set OTEL_EXPORTER_OTLP_ENDPOINT or "
              "CAUSALTRACE_PHOENIX_URL)", file=sys.stderr)
        return
    from causaltrace.attribution.stages.confidence import is_uncertain

    done = annotate_verdict(run, verdict, uncertain=is_uncertain(verdict))
    if done.warning is not None:
        print(f"causaltrace: warning: {safe_text(done.warning)}", file=sys.stderr)
        return
    where = f" (Phoenix annotation on span {done.annotated_span_id})" if done.phoenix_annotation else ""
    print(f"causaltrace: annotated trace {done.trace_id}: span {safe_text(repr(done.span_name))}{where}",
          file=sys.stderr)


def _exported(run: Any) -> bool:
    """Whether the run's spans went to a backend (its steps have span ids): only then is it annotated by default — a
    Who&When log or a run recorded without an exporter has no trace there to annotate."""
    return any(s.span_id or (s.source is not None and s.source.span_id) for s in run.steps)
