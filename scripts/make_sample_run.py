"""Write examples/sample_run.otlp.jsonl: a SYNTHETIC failed run (no benchmark data) emitted through the real
runtime and exported as OTLP/JSON — the bundled sample the README's first command imports and shows.

The team: a planner restates the task, a solver calls an `add_range` tool with an off-by-one upper bound, the
reviewer carries the wrong total forward, and the verifier fails the run.
"""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

import causaltrace
from causaltrace.collector.otlp import run_to_otlp
from causaltrace.config import TraceConfig
from causaltrace.instrumentation.runs import current_run
from causaltrace.instrumentation.steps import Dep
from causaltrace.instrumentation.tracing import configure, reset_tracing

TASK = "What is the sum of the integers from 1 to 10 inclusive?"


def emit() -> causaltrace.Run:
    configure(TracerProvider(), TraceConfig(store=False))
    with causaltrace.run(task=TASK, verify="55", name="sample: sum 1..10") as handle:
        ctx = current_run()
        ctx.set_framework("synthetic")
        task = ctx.add_step("task", agent="user", content=TASK, metadata={"user_input": True})
        p_turn = ctx.start_step("agent_turn", agent="planner", depends_on=[Dep(task.step_id, "saw")])
        p_llm = ctx.start_step("llm_response", agent="planner", parent=p_turn, model="scripted",
                               depends_on=[Dep(task.step_id, "saw")])
        p_llm.end(content="Plan: add the integers 1..10 with add_range(start=1, stop=10), then review.",
                  usage=(42, 18))
        plan = ctx.add_step("message", agent="planner", parent=p_turn, depends_on=[Dep(p_llm.step_id, "produced_by")],
                            content="Plan: add the integers 1..10 with add_range(start=1, stop=10), then review.",
                            outputs={"text": "Plan: add the integers 1..10 with add_range(start=1, stop=10)"})
        p_turn.end()
        s_turn = ctx.start_step("agent_turn", agent="solver", depends_on=[Dep(plan.step_id, "saw")])
        s_llm = ctx.start_step("llm_response", agent="solver", parent=s_turn, model="scripted",
                               depends_on=[Dep(task.step_id, "saw"), Dep(plan.step_id, "saw")])
        s_llm.end(content="", usage=(77, 12),
                  outputs={"text": "", "tool_calls": [{"name": "add_range", "arguments": {"start": 1, "stop": 10},
                                                       "call_alias": "call#0"}]})
        call = ctx.add_step("tool_call", agent="solver", parent=s_turn, tool_name="add_range", call_id="call_1",
                            arguments={"start": 1, "stop": 10}, content='add_range({"start": 1, "stop": 10})',
                            depends_on=[Dep(s_llm.step_id, "produced_by")])
        flaky = ctx.add_step("tool_call", agent="solver", parent=s_turn, tool_name="lookup", call_id="call_2",
                             arguments={"q": "gauss formula"}, content='lookup({"q": "gauss formula"})',
                             depends_on=[Dep(s_llm.step_id, "produced_by")])
        res = ctx.start_step("tool_response", agent="solver", parent=s_turn, tool_name="add_range", call_id="call_1",
                             depends_on=[Dep(call.step_id, "tool_result_of")])
        res.end(content="45", outputs={"result": "45", "is_error": False})
        err = ctx.start_step("tool_response", agent="solver", parent=s_turn, tool_name="lookup", call_id="call_2",
                             depends_on=[Dep(flaky.step_id, "tool_result_of")])
        err.end(error=TimeoutError("lookup service timed out"),
                outputs={"result": "lookup service timed out", "is_error": True})
        s_llm2 = ctx.start_step("llm_response", agent="solver", parent=s_turn, model="scripted",
                                depends_on=[Dep(res.step_id, "observed"), Dep(err.step_id, "observed"),
                                            Dep(s_llm.step_id, "continues")])
        s_llm2.end(content="The sum of 1..10 is 45.", usage=(120, 9))
        s_msg = ctx.add_step("message", agent="solver", parent=s_turn, content="The sum of 1..10 is 45.",
                             outputs={"text": "The sum of 1..10 is 45."}, depends_on=[Dep(s_llm2.step_id, "produced_by")])
        s_turn.end()
        r_turn = ctx.start_step("agent_turn", agent="reviewer", depends_on=[Dep(s_msg.step_id, "saw")])
        r_llm = ctx.start_step("llm_response", agent="reviewer", parent=r_turn, model="scripted",
                               depends_on=[Dep(plan.step_id, "saw"), Dep(s_msg.step_id, "saw")])
        r_llm.end(content="The solver used add_range as planned; 45 looks right. APPROVE", usage=(150, 14))
        ctx.add_step("message", agent="reviewer", parent=r_turn,
                             content="The solver used add_range as planned; 45 looks right. APPROVE",
                             outputs={"text": "The solver used add_range as planned; 45 looks right. APPROVE"},
                             depends_on=[Dep(r_llm.step_id, "produced_by")])
        r_turn.end()
        ctx.add_step("final_answer", agent="solver", content="45", outputs={"text": "45"},
                     depends_on=[Dep(s_msg.step_id, "answer_of")])
        ctx.report_end(final_answer="The sum of 1..10 is 45.")
    reset_tracing()
    return handle.run


def main() -> None:
    run = emit()
    out = Path(__file__).resolve().parent.parent / "examples" / "sample_run.otlp.jsonl"
    out.write_text(json.dumps(run_to_otlp(run), ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {out} ({len(run.steps)} steps, outcome {run.outcome.status})")


if __name__ == "__main__":
    main()
