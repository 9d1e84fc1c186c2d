"""The OpenTelemetry GenAI semantic conventions causaltrace follows, as a table (issue 33 item 4).

Written from the GenAI spans' pages (gen-ai-spans.md, gen-ai-agent-spans.md) of semantic-conventions v1.41.1, the
release the declared opentelemetry-semantic-conventions lower bound (0.63b0) was generated from (its newest
``Schemas`` entry): per operation,
the span kind, the attributes that are required or conditionally required (``REQUIRED``: checked on every span of
that operation; a conditional one only where its condition holds, :data:`CONDITIONAL`), the recommended ones
(``RECOMMENDED``: checked where the clients give them, :data:`GIVEN`), and the opt-in content attributes
(``OPT_IN``: only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``).
"""

from __future__ import annotations

CONVENTIONS_VERSION = "1.41.1"

#: operation → span kind (``SpanKind`` name)
SPAN_KIND = {"chat": "CLIENT", "execute_tool": "INTERNAL", "invoke_agent": "INTERNAL", "invoke_workflow": "INTERNAL"}

#: operation → the span name's form (``{}`` is the model / tool / agent / workflow name)
SPAN_NAME = {"chat": "chat {}", "execute_tool": "execute_tool {}", "invoke_agent": "invoke_agent {}",
             "invoke_workflow": "invoke_workflow {}"}

REQUIRED = {
    "chat": {"gen_ai.operation.name", "gen_ai.provider.name"},
    "execute_tool": {"gen_ai.operation.name"},
    "invoke_agent": {"gen_ai.operation.name", "gen_ai.provider.name"},
    "invoke_workflow": {"gen_ai.operation.name"},
}

#: conditionally required: attribute → the condition, as "when the span has X" (checked as: X present → required)
CONDITIONAL = {
    "chat": {"gen_ai.request.model": "always known here", "gen_ai.conversation.id": "always known here",
             "server.port": "server.address"},
    "execute_tool": {},
    "invoke_agent": {"gen_ai.agent.name": "always known here", "gen_ai.conversation.id": "always known here"},
    "invoke_workflow": {"gen_ai.workflow.name": "causaltrace.run.name"},  # a named run
}

#: recommended (and, for agents, "conditionally required when available": ``gen_ai.agent.id`` / ``.description``)
RECOMMENDED = {
    "chat": {"gen_ai.request.temperature", "gen_ai.request.max_tokens", "gen_ai.request.top_p",
             "gen_ai.request.seed", "gen_ai.request.stop_sequences", "gen_ai.request.frequency_penalty",
             "gen_ai.request.presence_penalty", "gen_ai.response.id", "gen_ai.response.model",
             "gen_ai.response.finish_reasons", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens",
             "server.address"},
    "execute_tool": {"gen_ai.tool.call.id", "gen_ai.tool.description", "gen_ai.tool.name", "gen_ai.tool.type"},
    "invoke_agent": {"gen_ai.agent.description", "gen_ai.agent.id"},
    "invoke_workflow": set(),
}

OPT_IN = {
    "chat": {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions",
             "gen_ai.tool.definitions"},
    "execute_tool": {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"},
    "invoke_agent": set(),
    "invoke_workflow": set(),
}

#: The recommended attributes the example teams' clients give (OpenAI clients over testing.openai_wire, tools with
#: descriptions, agents with descriptions): each must be on every span of its operation in those runs.
GIVEN = {
    "autogen": {
        "chat": {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons",
                 "server.address"},
        "execute_tool": {"gen_ai.tool.call.id", "gen_ai.tool.description", "gen_ai.tool.name", "gen_ai.tool.type"},
        "invoke_agent": {"gen_ai.agent.description"},
    },
    "smolagents": {
        "chat": {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.id",
                 "gen_ai.response.model", "gen_ai.request.stop_sequences", "server.address"},
        "execute_tool": {"gen_ai.tool.name", "gen_ai.tool.type"},
        "invoke_agent": set(),
    },
}
