"""The Who&When harness behind ``causaltrace bench whowhen`` (issue 5; ARCHITECTURE "Benchmark JSON").

Usage::

    report = await bench_whowhen(data_dir, ["graph", "all-at-once"], model="gpt-4o-mini", subset="all")
    # {method_name: one-method object} (a single method: the one-method object itself)
    report = await bench_whowhen(data_dir, ["graph"], split="dev")   # tune here; "test" is the other half

Scoring (FACTS.md "Who&When", SEEDS §5–§6): one prediction per file and every file in the denominator (no answer,
a failed diagnosis → wrong). **Strict**: the predicted agent's base name equals the label, the predicted 0-based
step equals the label. **Official** (the Who&When evaluator's legacy rule, reported as such): the label is a
case-sensitive *substring* of the prediction (gold step "1" accepts "12"). ``step_within_1`` / ``_3``:
|predicted − label| ≤ 1 / 3. ``coverage_at_k`` (methods whose candidates are a ranking): the labelled step is among
the top k candidates. Percentages are 0–100 with 2 decimals; per-trace means use 2 decimals (seconds 3).

**Held-out discipline** (issue 20): the split is fixed — odd file numbers are the TEST half, even ones the dev
half, in both subsets (Algorithm-Generated 63 / 63, Hand-Crafted 29 / 29). ``--split dev|test|all`` (default
``all``) selects it before ``--limit``; the JSON records ``"split"`` and ``"split_note"``. Tune only on dev. The
test half is **seen by earlier tuning**: the ``graph`` refinements made before issue 20 were made reading failures on
all 184 traces (:mod:`causaltrace.attribution.methods.graph` says which), so its test figures are not yet held-out
figures; the table title says so.

**Hits and intervals**: ``hits`` holds the counts behind the strict accuracies (``{"agent", "step",
"agent_step"}``, out of ``n``) and ``ci95`` the 95 % Wilson score interval of the agent and step accuracy (percent,
2 decimals; :func:`wilson_interval`) — on Hand-Crafted's test half one trace is 3.4 points, so a difference inside
the interval is noise. Notes quote ``hits / n [low, high]``, as the line under the table prints it.

Decisions where the contracts are silent:

* ``by_length`` buckets count the trace's steps; each bucket holds ``n`` and the strict ``agent_accuracy``,
  ``step_accuracy``, ``agent_step_accuracy`` (``null`` when empty).
* Selection: ``--limit N`` takes the first N traces ordered by file number (with ``--subset all``, Algorithm-
  Generated before Hand-Crafted at equal numbers, so both subsets appear); ``--order size`` orders by the characters
  of the task and the log's entries (what a model reads: every prompt carries the task), ties by file number then
  subset.
* ``calls_by_stage`` has one key per model-calling stage of the method (``Method.llm_stage_ids`` minus ablated
  ones, plus any other stage that made calls), valued by the mean calls per trace.
* A method that needs a model is refused before anything runs when none is given (UserError naming ``--model``).
* Diagnoses run ``concurrency`` traces at a time, and LLM calls share one :class:`~causaltrace.attribution.judge.Judge`
  (one concurrency limit, one cache) per model; reruns are answered from the cache (resumable).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from causaltrace.attribution.engine import ModelArg, diagnose, ensure_builtin_methods, resolve_judge
from causaltrace.attribution.stages.confidence import calibration, is_uncertain
from causaltrace.collector.whowhen import SUBSET_DIRS, agent_name, iter_whowhen
from causaltrace.exceptions import UserError
from causaltrace.protocols import get_method
from causaltrace.schema import Diagnosis, Run

__all__ = [
    "LENGTH_BUCKETS",
    "SPLIT_NOTES",
    "Split",
    "TraceResult",
    "bench_whowhen",
    "default_data_dir",
    "label_version",
    "render_table",
    "select_runs",
    "split_of",
    "summarise",
    "wilson_interval",
]

Subset = Literal["algo", "hand", "all"]
LENGTH_BUCKETS: tuple[tuple[str, int, int | None], ...] = (
    ("1-10", 1, 10),
    ("11-20", 11, 20),
    ("21-40", 21, 40),
    ("41-80", 41, 80),
    ("81+", 81, None),
)
_SUBSET_ORDER = {"algo": 0, "hand": 1}
Split = Literal["dev", "test", "all"]
#: What each split is, as the JSON (``split_note``) and the table title say it.
SPLIT_NOTES: dict[str, str] = {
    "dev": "dev half (even file numbers): tune here",
    "test": "TEST half (odd file numbers), seen by earlier tuning: graph's refinements before issue 20 were made on "
            "all 184 traces",
    "all": "every trace (both halves)",
}
#: z of a two-sided 95 % interval.
_Z95 = 1.959963984540054


def default_data_dir() -> Path:
    """``$CAUSALTRACE_WHOWHEN_DIR``, else ``../shared/data/whowhen`` next to the repository, else under the cwd."""
    env = os.environ.get("CAUSALTRACE_WHOWHEN_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parents[3]
    for base in (repo, Path.cwd()):
        cand = base.parent / "shared" / "data" / "whowhen"
        if cand.is_dir():
            return cand
    return repo.parent / "shared" / "data" / "whowhen"


def label_version(data_dir: Path, runs: Sequence[Run] = ()) -> str | None:
    """The data folder's ``VERSION`` (or the one the loader recorded on the runs)."""
    for folder in (data_dir, data_dir.parent):
        try:
            text = (folder / "VERSION").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if text:
            return text
    for run in runs:
        if run.annotations is not None and isinstance(run.annotations.extra.get("label_version"), str):
            return str(run.annotations.extra["label_version"])
    return None


def _subset(run: Run) -> str:
    extra = run.annotations.extra if run.annotations else {}
    return str(extra.get("subset", "algo"))


def _file_number(run: Run) -> int:
    extra = run.annotations.extra if run.annotations else {}
    value = extra.get("file_number")
    return value if isinstance(value, int) else 10**9


def split_of(run: Run) -> Literal["dev", "test"]:
    """The half a Who&When trace belongs to: ``test`` for an odd file number, ``dev`` for an even one (issue 20;
    the same rule in both subsets). A trace without a file number is ``dev`` (it cannot be held out by number)."""
    number = _file_number(run)
    return "test" if number != 10**9 and number % 2 == 1 else "dev"


def wilson_interval(hits: int, n: int, z: float = _Z95) -> tuple[float, float] | None:
    """The Wilson score interval of ``hits / n`` (fractions 0–1; None when ``n`` is 0).

    Unlike the normal approximation it stays inside [0, 1] and is not degenerate at 0 or n hits, which matters at
    the sizes here (29 Hand-Crafted test traces).
    """
    if n <= 0:
        return None
    p = hits / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    return max(0.0, centre - half), min(1.0, centre + half)


def _ci95(hits: int, n: int) -> list[float] | None:
    interval = wilson_interval(hits, n)
    return None if interval is None else [round(100 * interval[0], 2), round(100 * interval[1], 2)]


def _chars(run: Run) -> int:
    """What a model reads of the run: the task (every prompt carries it) and the log's entries."""
    return len(run.task or "") + sum(len(s.content) for s in run.steps)


def select_runs(
    data_dir: Path,
    subset: Subset = "all",
    *,
    limit: int | None = None,
    order: Literal["file", "size"] = "file",
    split: Split = "all",
) -> list[Run]:
    """The traces to run, in order (module docstring: ``--split``, then ``--limit`` / ``--order``)."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise UserError(f"no Who&When data at {str(data_dir)!r}; pass --data DIR (the folder holding "
                        f"{SUBSET_DIRS['algo']}/ and {SUBSET_DIRS['hand']}/)")
    if split not in SPLIT_NOTES:
        raise UserError(f"unknown split {split!r}; choose dev, test or all")
    runs = [r for r in iter_whowhen(data_dir, subset) if split == "all" or split_of(r) == split]
    if order == "size":
        runs.sort(key=lambda r: (_chars(r), _file_number(r), _SUBSET_ORDER.get(_subset(r), 9)))
    else:
        runs.sort(key=lambda r: (_file_number(r), _SUBSET_ORDER.get(_subset(r), 9)))
    if limit is not None:
        if limit < 1:
            raise UserError("--limit must be at least 1")
        runs = runs[:limit]
    return runs


@dataclass(frozen=True)
class TraceResult:
    """One method's diagnosis of one trace, with the label it is scored against."""

    run_id: str
    subset: str
    steps: int
    label_agent: str
    label_step: int
    diagnosis: Diagnosis

    @property
    def predicted_agent(self) -> str | None:
        return None if self.diagnosis.failed else self.diagnosis.agent

    @property
    def predicted_step(self) -> int | None:
        return None if self.diagnosis.failed else self.diagnosis.decisive_step_index

    def agent_ok(self) -> bool:
        a = self.predicted_agent
        return a is not None and agent_name(a).strip() == self.label_agent.strip()

    def step_ok(self) -> bool:
        return self.predicted_step is not None and self.predicted_step == self.label_step

    def agent_ok_official(self) -> bool:
        a = self.predicted_agent
        return a is not None and self.label_agent in a

    def step_ok_official(self) -> bool:
        s = self.predicted_step
        return s is not None and str(self.label_step) in str(s)

    def within(self, k: int) -> bool:
        s = self.predicted_step
        return s is not None and abs(s - self.label_step) <= k

    def covered(self, k: int) -> bool:
        return self.label_step in [c.index for c in self.diagnosis.candidates[:k]]


def _pct(hits: int, n: int) -> float | None:
    return round(100.0 * hits / n, 2) if n else None


def _mean(values: Sequence[float], digits: int = 2) -> float:
    return round(sum(values) / len(values), digits) if values else 0.0


def summarise(
    results: Sequence[TraceResult],
    *,
    method: str,
    model: str | None,
    with_answer: bool,
    subset: str,
    label_version: str | None,
    ranks: bool,
    stage_ids: Sequence[str] = (),
    by_subset: bool = False,
    split: Split = "all",
) -> dict[str, Any]:
    """The one-method object of ARCHITECTURE "Benchmark JSON" for ``results`` (plus ``split``, ``hits``, ``ci95``)."""
    n = len(results)

    def count(pred: Callable[[TraceResult], bool], rows: Sequence[TraceResult] = results) -> int:
        return sum(1 for r in rows if pred(r))

    hits = {"agent": count(TraceResult.agent_ok), "step": count(TraceResult.step_ok),
            "agent_step": count(lambda r: r.agent_ok() and r.step_ok())}
    out: dict[str, Any] = {
        "method": method,
        "model": model,
        "with_answer": with_answer,
        "subset": subset,
        "split": split,
        "split_note": SPLIT_NOTES[split],
        "label_version": label_version,
        "n": n,
        "agent_accuracy": _pct(hits["agent"], n),
        "step_accuracy": _pct(hits["step"], n),
        "agent_step_accuracy": _pct(hits["agent_step"], n),
        "hits": hits,
        "ci95": {"agent": _ci95(hits["agent"], n), "step": _ci95(hits["step"], n)},
        "agent_accuracy_official": _pct(count(TraceResult.agent_ok_official), n),
        "step_accuracy_official": _pct(count(TraceResult.step_ok_official), n),
        "step_within_1": _pct(count(lambda r: r.within(1)), n),
        "step_within_3": _pct(count(lambda r: r.within(3)), n),
        "coverage_at_k": (
            {str(k): _pct(count(lambda r, k=k: r.covered(k)), n) for k in (1, 3, 5, 10)} if ranks else None
        ),
        "by_length": {},
    }
    for name, lo, hi in LENGTH_BUCKETS:
        rows = [r for r in results if r.steps >= lo and (hi is None or r.steps <= hi)]
        m = len(rows)
        out["by_length"][name] = {
            "n": m,
            "agent_accuracy": _pct(count(TraceResult.agent_ok, rows), m),
            "step_accuracy": _pct(count(TraceResult.step_ok, rows), m),
            "agent_step_accuracy": _pct(count(lambda r: r.agent_ok() and r.step_ok(), rows), m),
        }
    if by_subset:
        out["by_subset"] = {
            key: summarise([r for r in results if r.subset == key], method=method, model=model,
                           with_answer=with_answer, subset=key, label_version=label_version, ranks=ranks,
                           stage_ids=stage_ids, split=split)
            for key in ("algo", "hand")
        }
    costs = [r.diagnosis.cost for r in results]
    stages = list(dict.fromkeys([*stage_ids, *(s for c in costs for s in c.calls_by_stage)]))
    out["calls_per_trace"] = _mean([c.llm_calls for c in costs])
    out["calls_by_stage"] = {s: _mean([c.calls_by_stage.get(s, 0) for c in costs]) for s in stages}
    out["input_tokens_per_trace"] = _mean([c.input_tokens for c in costs])
    out["output_tokens_per_trace"] = _mean([c.output_tokens for c in costs])
    out["seconds_per_trace"] = _mean([c.seconds for c in costs], 3)
    out["failed_diagnoses"] = sum(1 for r in results if r.diagnosis.failed)
    out["calibration"] = calibration([(r.diagnosis.confidence, r.step_ok()) for r in results])
    # issue 32 item 2: the top candidate is always scored; beside it, how many answers were uncertain and how often
    # the others (a finding at the top, or a verified repair) were right
    certain = [r for r in results if not is_uncertain(r.diagnosis)]
    out["uncertain_share"] = _pct(n - len(certain), n)
    out["certain_hits"] = {"step": count(TraceResult.step_ok, certain), "n": len(certain)}
    out["certain_step_accuracy"] = _pct(out["certain_hits"]["step"], len(certain))
    return out


def _method_info(name: str, ablate: Sequence[str]) -> tuple[bool, bool, list[str]]:
    cls = get_method(name)
    needs = bool(getattr(cls, "needs_model", False))
    ranks = bool(getattr(cls, "ranks", False))
    llm_stages = getattr(cls, "llm_stage_ids", None)
    if llm_stages is None:
        llm_stages = getattr(cls, "stage_ids", ()) if needs else ()
    return needs, ranks, [s for s in llm_stages if s not in ablate]


async def bench_whowhen(
    data_dir: Path,
    methods: Sequence[str],
    model: ModelArg = None,
    *,
    subset: Subset = "all",
    with_answer: bool = False,
    limit: int | None = None,
    order: Literal["file", "size"] = "file",
    split: Split = "all",
    concurrency: int = 4,
    ablate: Sequence[str] = (),
    judge_options: Mapping[str, Any] | None = None,
    progress: Callable[[str, Run, Diagnosis], None] | None = None,
    runs: Sequence[Run] | None = None,
    human_speakers: Sequence[str] | None = None,
    method_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run ``methods`` over the selected traces and summarise each (module docstring); ``human_speakers`` as in
    :func:`~causaltrace.attribution.engine.diagnose`; ``method_options`` maps a method name to its own options
    (``{"causalflow": {"k": 1, "exhaustive": False}}``: the local-model plumbing test's bound), recorded in each
    Diagnosis's ``settings`` artifact.

    Returns the one-method object for a single method, else ``{method_name: one-method object}``.
    """
    if not methods:
        raise UserError("name at least one method (--method M[,M2,…])")
    ensure_builtin_methods()
    data_dir = Path(data_dir)
    infos = {m: _method_info(m, ablate) for m in methods}
    known = {sid for m in methods for sid in _stage_ids(m)}
    unknown = sorted(set(ablate) - known)
    if unknown:
        raise UserError(f"no method among {', '.join(methods)} has the stage(s) {', '.join(map(repr, unknown))}")
    stray = sorted(set(method_options or {}) - set(methods))
    if stray:
        raise UserError(f"method options given for {', '.join(map(repr, stray))}, which is not among the methods")
    judge = None
    # issue 6: methods that merely *use* a model when given one (graph's LLM stages) get it too
    uses = {m: infos[m][0] or bool(getattr(get_method(m), "uses_model", False)) for m in methods}
    if any(uses.values()):
        judge = resolve_judge(model, {"concurrency": concurrency, **dict(judge_options or {})})
        needing = [m for m, (needs, _, _) in infos.items() if needs]
        if judge is None and needing:
            raise UserError(f"method(s) {', '.join(needing)} need a model: pass --model MODEL (e.g. --model local "
                            "or --model gpt-4o-mini) or set CAUSALTRACE_MODEL")
    selected = list(runs) if runs is not None else select_runs(data_dir, subset, limit=limit, order=order,
                                                               split=split)
    version = label_version(data_dir, selected)
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(method: str, run: Run) -> TraceResult:
        async with gate:
            d = await diagnose(run, method, judge if uses[method] else None, with_answer=with_answer,
                               ablate=[a for a in ablate if a in _stage_ids(method)], human_speakers=human_speakers,
                               store=False, **dict((method_options or {}).get(method, {})))
        if progress is not None:
            progress(method, run, d)
        ann = run.annotations
        assert ann is not None and ann.mistake_step is not None
        return TraceResult(run.run_id, _subset(run), len(run.steps), ann.mistake_agent or "", ann.mistake_step, d)

    tasks = {m: [asyncio.ensure_future(one(m, r)) for r in selected] for m in methods}
    try:
        done = {m: await asyncio.gather(*tasks[m]) for m in methods}
    except BaseException:
        for pending in (t for ts in tasks.values() for t in ts):
            pending.cancel()
        await asyncio.gather(*(t for ts in tasks.values() for t in ts), return_exceptions=True)
        raise
    report: dict[str, Any] = {}
    for m in methods:
        results = done[m]
        needs, ranks, stages = infos[m]
        used = needs or any(r.diagnosis.model for r in results)
        report[m] = summarise(results, method=m, model=judge.name if (used and judge) else None,
                              with_answer=with_answer, subset=subset, label_version=version, ranks=ranks,
                              stage_ids=stages, by_subset=subset == "all", split=split)
    return report[methods[0]] if len(methods) == 1 else report


def _stage_ids(method: str) -> tuple[str, ...]:
    return tuple(getattr(get_method(method), "stage_ids", ()))


def render_table(report: Mapping[str, Any], console: Any) -> None:
    """Print one row per method (the side-by-side comparison)."""
    from rich.table import Table

    rows = [report] if "method" in report else list(report.values())
    first = rows[0] if rows else {}
    split = first.get("split", "all")
    title = (f"Who&When · subset {first.get('subset')} · split {split}"
             + (f" ({first.get('split_note')})" if split != "all" else "") + f" · n={first.get('n')} · "
             f"{'with' if first.get('with_answer') else 'without'} answer · labels {first.get('label_version')}")
    table = Table(title=title)
    widest = max([len(str(r.get("method", ""))) for r in rows] + [6])
    for col in ("method", "model", "agent %", "step %", "agent+step %", "official a/s %", "±1 %", "±3 %",
                "cov@1/3/5/10 %", "calls/trace", "tokens in/out", "s/trace", "failed"):
        if col == "method":
            table.add_column(col, no_wrap=True, min_width=widest)
        else:
            table.add_column(col, justify="left" if col == "model" else "right")

    def f(v: Any) -> str:
        return "–" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v))

    for r in rows:
        cov = r.get("coverage_at_k")
        table.add_row(
            r["method"], r.get("model") or "–", f(r["agent_accuracy"]), f(r["step_accuracy"]),
            f(r["agent_step_accuracy"]), f"{f(r['agent_accuracy_official'])}/{f(r['step_accuracy_official'])}",
            f(r["step_within_1"]), f(r["step_within_3"]),
            "/".join(f(cov[k]) for k in ("1", "3", "5", "10")) if cov else "–",
            f(r["calls_per_trace"]), f"{r['input_tokens_per_trace']:.0f}/{r['output_tokens_per_trace']:.0f}",
            f"{r['seconds_per_trace']:.3f}", str(r["failed_diagnoses"]),
        )
    console.print(table)
    for r in rows:
        console.print(f"  {r['method']} · {r.get('subset')}: {_hits_line(r)}")
        for key, sub in (r.get("by_subset") or {}).items():
            console.print(f"  {r['method']} · {key}: {_hits_line(sub)}")


def _hits_line(r: Mapping[str, Any]) -> str:
    """``agent 94/184 = 51.09 % [43.9, 58.2] · step 42/184 = 22.83 % [17.3, 29.4]``: hits / n, the accuracy and
    its 95 % Wilson interval, as notes quote them."""
    hits, ci, n = r.get("hits") or {}, r.get("ci95") or {}, r.get("n")

    def one(key: str, pct: Any) -> str:
        interval = ci.get(key)
        band = f" [{interval[0]:.1f}, {interval[1]:.1f}]" if interval else ""
        value = "–" if pct is None else f"{pct:.2f} %"
        return f"{key} {hits.get(key, '–')}/{n} = {value}{band}"

    line = f"{one('agent', r.get('agent_accuracy'))} · {one('step', r.get('step_accuracy'))}"
    certain = r.get("certain_hits")
    if certain is not None and r.get("uncertain_share") is not None:
        line += (f" · uncertain {r['uncertain_share']:.2f} % · not uncertain: step {certain['step']}/{certain['n']}"
                 + (f" = {r['certain_step_accuracy']:.2f} %" if r.get("certain_step_accuracy") is not None else ""))
    return line
