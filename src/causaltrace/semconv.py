"""Span attribute names, and the mapping between Steps / Runs and span attributes.

OTel GenAI names (``gen_ai.*``) where one exists, OpenInference names (``openinference.span.kind``,
``input.value``, ``llm.*``, ``tool.*``, ``session.id``: what Arize Phoenix reads) beside them, ``causaltrace.*``
for the rest. The mapping lives here so the live emitter, the OTLP exporter of stored runs and the OTLP / Jaeger
importers agree on one format:

* a step span carries its identity (``causaltrace.step.*``), its payload (``causaltrace.step.content``,
  ``.inputs``, ``.outputs`` as JSON), GenAI attributes, and its dependencies twice — as OTel Links with a
  ``causaltrace.dependency.kind`` link attribute, and as the parallel lists ``causaltrace.depends_on.step_ids`` /
  ``causaltrace.depends_on.kinds`` (Jaeger's UI drops link attributes, Phoenix drops links);
* the run's root span carries Run-level fields as ``causaltrace.run.*`` attributes, JSON where structured;
* span names, kinds and ``gen_ai.*`` attributes follow the OTel GenAI conventions: the root is the workflow
  (``invoke_workflow {run name}``, INTERNAL, ``gen_ai.workflow.name``), a model call is ``chat {model}`` (CLIENT,
  ``gen_ai.provider.name``, response model and finish reasons when known), a tool call ``execute_tool {tool}``
  (``gen_ai.tool.type``), an agent's turn ``invoke_agent {agent}``, a plan ``plan {agent}``; every GenAI operation
  carries ``gen_ai.conversation.id`` (the run id) and a failed one ``error.type``. Importers recognise the legacy
  names too (``causaltrace.run``, ``llm_response planner``): they read attributes, never names, except to tell a
  root span (:func:`is_root_span_name`);
* the OpenInference attributes are derived from those attributes after the payload policy has hidden and redacted
  them (:data:`OPENINFERENCE_SPAN_KIND_BY_STEP` says which kind each step gets, :func:`openinference_attributes`
  which payload fills ``input.value`` / ``output.value``); they are written, never read back: the importers
  rebuild steps from ``causaltrace.*`` and ``gen_ai.*`` only.
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as _gen_ai
from opentelemetry.semconv.attributes import error_attributes as _error
from opentelemetry.semconv.attributes import server_attributes as _server

from causaltrace.recording.long_texts import attribute_json, cut_json, model_json_pieces
from causaltrace.schema import (
    Annotations,
    Dependency,
    Outcome,
    Recording,
    Step,
    StepError,
    StepSource,
    TokenUsage,
    utf8_safe,
)

__all__ = [
    "CLIENT_STEP_KINDS", "ERROR_TYPE", "GEN_AI_AGENT_NAME", "GEN_AI_CONVERSATION_ID", "GEN_AI_OPERATION_NAME",
    "GEN_AI_PROVIDER_NAME", "GEN_AI_REQUEST_MODEL", "GEN_AI_RESPONSE_FINISH_REASONS", "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_TOOL_CALL_ID", "GEN_AI_TOOL_NAME", "GEN_AI_TOOL_TYPE", "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS", "GEN_AI_WORKFLOW_NAME", "INSTRUMENTATION_NAME", "RESULT_PREFIX",
    "LEGACY_ROOT_SPAN_NAME", "OPERATION_BY_STEP", "OI_INPUT_VALUE", "OI_OUTPUT_VALUE", "OI_SPAN_KIND",
    "OPENINFERENCE_SPAN_KIND_BY_STEP", "OPENINFERENCE_SPAN_KIND_ROOT", "PROJECT_NAME", "ROOT_SPAN_NAME",
    "client_provider", "error_type_of", "is_client_span", "is_root_span_name", "openinference_attributes",
    "provider_name", "root_span_name", "run_attributes", "run_fields_from_attributes", "span_name", "step_attributes",
    "step_from_attributes",
]

INSTRUMENTATION_NAME = "causaltrace"
#: The root span's name before the GenAI conventions were followed (issue 22): still recognised on import.
LEGACY_ROOT_SPAN_NAME = "causaltrace.run"
ROOT_SPAN_NAME = LEGACY_ROOT_SPAN_NAME  # kept for old callers; new roots are named by :func:`root_span_name`

# OTel GenAI semantic conventions: names and values from ``opentelemetry-semantic-conventions`` (its ``gen_ai``
# module is marked deprecated in favour of the semantic-conventions-genai project, which has no PyPI package; the
# names are the same), hand-written only where that package has none (marked below).
GEN_AI_OPERATION_NAME = _gen_ai.GEN_AI_OPERATION_NAME
GEN_AI_PROVIDER_NAME = _gen_ai.GEN_AI_PROVIDER_NAME
GEN_AI_AGENT_NAME = _gen_ai.GEN_AI_AGENT_NAME
GEN_AI_WORKFLOW_NAME = _gen_ai.GEN_AI_WORKFLOW_NAME
GEN_AI_CONVERSATION_ID = _gen_ai.GEN_AI_CONVERSATION_ID
GEN_AI_TOOL_NAME = _gen_ai.GEN_AI_TOOL_NAME
GEN_AI_TOOL_TYPE = _gen_ai.GEN_AI_TOOL_TYPE
GEN_AI_TOOL_CALL_ID = _gen_ai.GEN_AI_TOOL_CALL_ID
GEN_AI_TOOL_DESCRIPTION = _gen_ai.GEN_AI_TOOL_DESCRIPTION
GEN_AI_TOOL_DEFINITIONS = _gen_ai.GEN_AI_TOOL_DEFINITIONS
GEN_AI_TOOL_CALL_ARGUMENTS = _gen_ai.GEN_AI_TOOL_CALL_ARGUMENTS
GEN_AI_TOOL_CALL_RESULT = _gen_ai.GEN_AI_TOOL_CALL_RESULT
GEN_AI_AGENT_ID = _gen_ai.GEN_AI_AGENT_ID
GEN_AI_AGENT_DESCRIPTION = _gen_ai.GEN_AI_AGENT_DESCRIPTION
GEN_AI_RESPONSE_ID = _gen_ai.GEN_AI_RESPONSE_ID
GEN_AI_INPUT_MESSAGES = _gen_ai.GEN_AI_INPUT_MESSAGES
GEN_AI_OUTPUT_MESSAGES = _gen_ai.GEN_AI_OUTPUT_MESSAGES
GEN_AI_SYSTEM_INSTRUCTIONS = _gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS
GEN_AI_REQUEST_TEMPERATURE = _gen_ai.GEN_AI_REQUEST_TEMPERATURE
GEN_AI_REQUEST_MAX_TOKENS = _gen_ai.GEN_AI_REQUEST_MAX_TOKENS
GEN_AI_REQUEST_TOP_P = _gen_ai.GEN_AI_REQUEST_TOP_P
GEN_AI_REQUEST_SEED = _gen_ai.GEN_AI_REQUEST_SEED
GEN_AI_REQUEST_STOP_SEQUENCES = _gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES
GEN_AI_REQUEST_FREQUENCY_PENALTY = _gen_ai.GEN_AI_REQUEST_FREQUENCY_PENALTY
GEN_AI_REQUEST_PRESENCE_PENALTY = _gen_ai.GEN_AI_REQUEST_PRESENCE_PENALTY
SERVER_ADDRESS = _server.SERVER_ADDRESS
SERVER_PORT = _server.SERVER_PORT
GEN_AI_REQUEST_MODEL = _gen_ai.GEN_AI_REQUEST_MODEL
GEN_AI_RESPONSE_MODEL = _gen_ai.GEN_AI_RESPONSE_MODEL
GEN_AI_RESPONSE_FINISH_REASONS = _gen_ai.GEN_AI_RESPONSE_FINISH_REASONS
GEN_AI_USAGE_INPUT_TOKENS = _gen_ai.GEN_AI_USAGE_INPUT_TOKENS
GEN_AI_USAGE_OUTPUT_TOKENS = _gen_ai.GEN_AI_USAGE_OUTPUT_TOKENS
ERROR_TYPE = _error.ERROR_TYPE
#: ``error.type`` when nothing names the error class (the conventions' own fallback value).
ERROR_TYPE_OTHER = _error.ErrorTypeValues.OTHER.value

OP_CHAT = _gen_ai.GenAiOperationNameValues.CHAT.value
OP_EXECUTE_TOOL = _gen_ai.GenAiOperationNameValues.EXECUTE_TOOL.value
OP_INVOKE_AGENT = _gen_ai.GenAiOperationNameValues.INVOKE_AGENT.value
OP_INVOKE_WORKFLOW = _gen_ai.GenAiOperationNameValues.INVOKE_WORKFLOW.value
#: Hand-written: the ``plan`` operation is in semantic-conventions-genai, not yet in the PyPI package.
OP_PLAN = "plan"
#: ``gen_ai.tool.type`` of a tool the agent calls as a function (the conventions' ``function``; hand-written: the
#: package has no enum for it).
TOOL_TYPE_FUNCTION = "function"
#: ``gen_ai.provider.name`` when neither the client nor the model id names a provider.
PROVIDER_UNKNOWN = "unknown"

# OpenInference semantic conventions (openinference-semantic-conventions; what Phoenix reads). Written by hand so
# that ``import causaltrace`` needs no OpenInference package; tests/test_semconv_openinference.py checks each name
# against that package.
OI_SPAN_KIND = "openinference.span.kind"
OI_INPUT_VALUE = "input.value"
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
OI_LLM_MODEL_NAME = "llm.model_name"
OI_LLM_TOKEN_COUNT_PROMPT = "llm.token_count.prompt"
OI_LLM_TOKEN_COUNT_COMPLETION = "llm.token_count.completion"
OI_LLM_TOKEN_COUNT_TOTAL = "llm.token_count.total"
OI_LLM_INPUT_MESSAGES = "llm.input_messages"
OI_LLM_OUTPUT_MESSAGES = "llm.output_messages"
OI_MESSAGE_ROLE = "message.role"
OI_MESSAGE_CONTENT = "message.content"
OI_LLM_INVOCATION_PARAMETERS = "llm.invocation_parameters"
OI_LLM_PROVIDER = "llm.provider"
OI_LLM_SYSTEM = "llm.system"
OI_TOOL_NAME = "tool.name"
OI_TOOL_PARAMETERS = "tool.parameters"
OI_TOOL_DESCRIPTION = "tool.description"
OI_GRAPH_NODE_ID = "graph.node.id"
OI_GRAPH_NODE_PARENT_ID = "graph.node.parent_id"
OI_SESSION_ID = "session.id"
#: Resource attribute choosing the Phoenix project (``CAUSALTRACE_PROJECT``, else ``OTEL_SERVICE_NAME``).
PROJECT_NAME = "openinference.project.name"
MIME_TEXT = "text/plain"
MIME_JSON = "application/json"

#: ``openinference.span.kind`` of the run's root span: a multi-agent run is a workflow of steps, a CHAIN (as
#: OpenInference's own AutoGen instrumentation marks a team's ``run_stream``); its agents are the AGENT spans.
OPENINFERENCE_SPAN_KIND_ROOT = "CHAIN"

#: ``openinference.span.kind`` per step kind. Model calls are LLM, tool and code work is TOOL, an agent's turn is
#: AGENT, reading memory is RETRIEVER; the steps that pass text along or decide the flow (the task entering, a
#: message, reasoning, a plan, a handoff, a speaker choice, the final answer, an error) are CHAIN, OpenInference's
#: kind for a link in the flow. No step is left UNKNOWN.
OPENINFERENCE_SPAN_KIND_BY_STEP: dict[str, str] = {
    "task": "CHAIN",
    "llm_response": "LLM",
    "reasoning": "CHAIN",
    "message": "CHAIN",
    "tool_call": "TOOL",
    "tool_response": "TOOL",
    "code_execution": "TOOL",
    "memory_access": "RETRIEVER",
    "planning": "CHAIN",
    "handoff": "CHAIN",
    "speaker_selection": "CHAIN",
    "final_answer": "CHAIN",
    "error": "CHAIN",
    "agent_turn": "AGENT",
}


# causaltrace: steps
STEP_ID = "causaltrace.step.id"
STEP_INDEX = "causaltrace.step.index"
STEP_KIND = "causaltrace.step.kind"
STEP_AGENT = "causaltrace.step.agent"
STEP_PARENT_ID = "causaltrace.step.parent_id"
STEP_CONTENT = "causaltrace.step.content"
STEP_INPUTS = "causaltrace.step.inputs"
STEP_OUTPUTS = "causaltrace.step.outputs"
STEP_ARGUMENTS = "causaltrace.step.arguments"
STEP_STATUS = "causaltrace.step.status"
STEP_ERROR_TYPE = "causaltrace.step.error.type"
STEP_ERROR_MESSAGE = "causaltrace.step.error.message"
STEP_ACTION_SIGNATURE = "causaltrace.step.action_signature"
STEP_METADATA = "causaltrace.step.metadata"
STEP_TRUNCATED = "causaltrace.step.truncated"
#: where an imported step was read from (``Step.source``; issue 34 item 3): the other instrumentor's span
SOURCE_TRACE_ID = "causaltrace.source.trace_id"
SOURCE_SPAN_ID = "causaltrace.source.span_id"
SOURCE_START_TIME = "causaltrace.source.start_time"
SOURCE_END_TIME = "causaltrace.source.end_time"
SOURCE_SPAN_KIND = "causaltrace.source.span_kind"
DEPENDS_ON_STEP_IDS = "causaltrace.depends_on.step_ids"
DEPENDS_ON_KINDS = "causaltrace.depends_on.kinds"
DEPENDENCY_KIND = "causaltrace.dependency.kind"
DEPENDENCY_STEP_ID = "causaltrace.dependency.step_id"

# causaltrace: a tool call and its result on one span (issue 33 item 3; collector.tool_spans says which)
#: A merged span's call step ended here (integer ns since the epoch; 0: no time): the span itself ends with the result.
STEP_ENDED_AT = "causaltrace.step.ended_at"
#: The result step's attributes on its call's span: ``causaltrace.step.X`` as ``causaltrace.result.X``,
#: ``causaltrace.depends_on.*`` as ``causaltrace.result.depends_on.*``, the GenAI fields the importer reads as
#: ``causaltrace.result.gen_ai.*``.
RESULT_PREFIX = "causaltrace.result."
RESULT_ID = RESULT_PREFIX + "id"
RESULT_KIND = RESULT_PREFIX + "kind"
RESULT_CONTENT = RESULT_PREFIX + "content"
RESULT_INPUTS = RESULT_PREFIX + "inputs"
RESULT_OUTPUTS = RESULT_PREFIX + "outputs"
RESULT_ARGUMENTS = RESULT_PREFIX + "arguments"
RESULT_METADATA = RESULT_PREFIX + "metadata"
RESULT_ERROR_MESSAGE = RESULT_PREFIX + "error.message"
RESULT_TRUNCATED = RESULT_PREFIX + "truncated"
#: The result step started here (integer ns; 0: no time); it ends with the span.
RESULT_STARTED_AT = RESULT_PREFIX + "started_at"
#: The result step's own span id where it is not the span's ("" for none): a stored run exported again.
RESULT_SPAN_ID = RESULT_PREFIX + "span_id"
#: Result step kinds that share their call's span, with the dependency kind that names the call.
RESULT_DEPENDENCY_BY_KIND: dict[str, str] = {"tool_response": "tool_result_of", "code_execution": "executes"}

# causaltrace: runs (root span)
RUN_ID = "causaltrace.run.id"
RUN_NAME = "causaltrace.run.name"
RUN_FRAMEWORK = "causaltrace.run.framework"
RUN_TASK = "causaltrace.run.task"
RUN_AGENTS = "causaltrace.run.agents"
RUN_OUTCOME = "causaltrace.run.outcome"
RUN_STATUS = "causaltrace.run.status"
RUN_METADATA = "causaltrace.run.metadata"
#: the key of ``Run.metadata`` holding the run's root span id (16 hex digits): the verdict's annotation span is its child
RUN_ROOT_SPAN_ID = "causaltrace.root_span_id"
RUN_ANNOTATIONS = "causaltrace.run.annotations"
RUN_RECORDING = "causaltrace.run.recording"
#: A live run's Recording on its root span (``causaltrace.collector.recording_otlp`` says how).
RECORDING_CHUNKS = "causaltrace.run.recording.chunks"
RECORDING_ENCODING = "causaltrace.run.recording.encoding"
RECORDING_CHARS = "causaltrace.run.recording.chars"
RECORDING_SHA256 = "causaltrace.run.recording.sha256"
RECORDING_OMITTED = "causaltrace.run.recording.omitted"
#: The root span event carrying a live run's Recording (the chunk attributes above, issue 33 item 4); before, they
#: were the root span's own attributes (still read on import).
RECORDING_EVENT = "causaltrace.run.recording"
RUN_STARTED_AT = "causaltrace.run.started_at"
RUN_ENDED_AT = "causaltrace.run.ended_at"

# diagnosis on the root span (issue "on failure")
DIAGNOSIS_STEP_ID = "causaltrace.diagnosis.step.id"
DIAGNOSIS_STEP_INDEX = "causaltrace.diagnosis.step.index"
DIAGNOSIS_AGENT = "causaltrace.diagnosis.agent"
DIAGNOSIS_CATEGORY = "causaltrace.diagnosis.category"
DIAGNOSIS_VERIFIED_BY = "causaltrace.diagnosis.verified_by"

#: Suffix the payload policy appends to a cut text; ``{n}`` is the number of characters removed.
TRUNCATION_MARKER = "…[causaltrace: truncated {n} chars]"

#: ``gen_ai.operation.name`` per step kind, where a GenAI operation fits (the run's root span is
#: ``invoke_workflow``: the run is the workflow, :func:`run_attributes`).
OPERATION_BY_STEP: dict[str, str] = {
    "llm_response": OP_CHAT,
    "tool_call": OP_EXECUTE_TOOL,
    "agent_turn": OP_INVOKE_AGENT,
    "planning": OP_PLAN,
}

#: Step kinds whose span is a CLIENT span (a call out to a model); every other span is INTERNAL (in-process agents,
#: tools and flow steps, as the conventions say for ``invoke_agent`` / ``execute_tool`` / ``invoke_workflow``).
CLIENT_STEP_KINDS = frozenset({"llm_response"})

_P = _gen_ai.GenAiProviderNameValues
#: ``gen_ai.provider.name`` from a word of the client's module / class name (lower case), first match wins. Values
#: from the package's list, and documented custom ones where it has none: ``ollama``, ``llama_cpp``,
#: ``huggingface``.
_PROVIDER_BY_CLIENT: tuple[tuple[str, str], ...] = (
    ("azure", _P.AZURE_AI_OPENAI.value),
    ("anthropic", _P.ANTHROPIC.value),
    ("ollama", "ollama"),
    ("llama_cpp", "llama_cpp"),
    ("llamacpp", "llama_cpp"),
    ("bedrock", _P.AWS_BEDROCK.value),
    ("vertex", _P.GCP_VERTEX_AI.value),
    ("gemini", _P.GCP_GEMINI.value),
    ("mistral", _P.MISTRAL_AI.value),
    ("cohere", _P.COHERE.value),
    ("groq", _P.GROQ.value),
    ("deepseek", _P.DEEPSEEK.value),
    ("huggingface", "huggingface"),
    ("inferenceclient", "huggingface"),
    ("transformers", "huggingface"),
    ("openai", _P.OPENAI.value),
)
#: A LiteLLM-style ``provider/model`` prefix of a model id.
_PROVIDER_BY_PREFIX: dict[str, str] = {
    "openai": _P.OPENAI.value, "azure": _P.AZURE_AI_OPENAI.value, "anthropic": _P.ANTHROPIC.value,
    "gemini": _P.GCP_GEMINI.value, "vertex_ai": _P.GCP_VERTEX_AI.value, "bedrock": _P.AWS_BEDROCK.value,
    "mistral": _P.MISTRAL_AI.value, "groq": _P.GROQ.value, "deepseek": _P.DEEPSEEK.value,
    "cohere": _P.COHERE.value, "xai": _P.X_AI.value, "perplexity": _P.PERPLEXITY.value, "ollama": "ollama",
    "ollama_chat": "ollama", "huggingface": "huggingface",
}
#: A model family's name at the start of a bare model id.
_PROVIDER_BY_MODEL: tuple[tuple[str, str], ...] = (
    ("gpt-", _P.OPENAI.value), ("chatgpt", _P.OPENAI.value), ("o1", _P.OPENAI.value), ("o3", _P.OPENAI.value),
    ("o4", _P.OPENAI.value), ("claude", _P.ANTHROPIC.value), ("gemini", _P.GCP_GEMINI.value),
    ("mistral", _P.MISTRAL_AI.value), ("mixtral", _P.MISTRAL_AI.value), ("codestral", _P.MISTRAL_AI.value),
    ("command", _P.COHERE.value), ("deepseek", _P.DEEPSEEK.value), ("grok", _P.X_AI.value),
    ("sonar", _P.PERPLEXITY.value),
)


def provider_name(model: str | None, client: str | None = None) -> str:
    """``gen_ai.provider.name`` by the instrumentation's best knowledge: the client library (its module / class
    path, e.g. ``autogen_ext.models.openai.OpenAIChatCompletionClient`` → ``openai``: the API it speaks), else the
    model id (a ``provider/`` prefix, a model family such as ``gpt-`` or ``claude``, an Ollama ``name:tag``), else
    ``unknown``. Memoised (every model call's span asks; a run has a handful of model ids)."""
    try:
        return _provider_name(model, client)
    except TypeError:  # an unhashable value: not memoised
        return _provider_name.__wrapped__(model, client)


@functools.lru_cache(maxsize=1024)
def _provider_name(model: str | None, client: str | None) -> str:
    if client:
        lowered = client.lower()
        for word, provider in _PROVIDER_BY_CLIENT:
            if word in lowered:
                return provider
    if not model:
        return PROVIDER_UNKNOWN
    lowered = model.strip().lower()
    prefix, slash, rest = lowered.partition("/")
    if slash and prefix in _PROVIDER_BY_PREFIX:
        return _PROVIDER_BY_PREFIX[prefix]
    name = rest if slash else lowered
    for start, provider in _PROVIDER_BY_MODEL:
        if name.startswith(start):
            return provider
    if ":" in name and not slash and " " not in name:
        return "ollama"  # Ollama's model:tag ids (llama3.1:8b)
    return PROVIDER_UNKNOWN


_CLIENT_PROVIDERS: dict[type, str | None] = {}


def client_provider(client: object) -> str | None:
    """The provider a model client object's class names (its module and class path, see :func:`provider_name`),
    or None when the class names none (a scripted or wrapping client: the model id decides). Cached per class."""
    cls = type(client)
    try:
        return _CLIENT_PROVIDERS[cls]
    except KeyError:
        pass
    provider: str | None = provider_name(None, f"{cls.__module__}.{cls.__qualname__}")
    if provider == PROVIDER_UNKNOWN:
        provider = None
    if len(_CLIENT_PROVIDERS) < 1024:
        _CLIENT_PROVIDERS[cls] = provider
    return provider


def span_name(step: Step) -> str:
    """The step span's name: the GenAI conventions' where the step is a GenAI operation (``chat {model}``,
    ``execute_tool {tool}``, ``invoke_agent {agent}``, ``plan {agent}``; the operation alone when the name is not
    known), else ``<kind> <tool or agent>``."""
    operation = OPERATION_BY_STEP.get(step.kind)
    if operation is not None:
        if operation == OP_CHAT:
            target = step.model
        elif operation == OP_EXECUTE_TOOL:
            target = step.tool_name
        else:
            target = step.agent
        return f"{operation} {target}" if target else operation
    target = step.tool_name or step.agent
    return f"{step.kind} {target}" if target else step.kind


def root_span_name(name: str | None) -> str:
    """The run root span's name: ``invoke_workflow {gen_ai.workflow.name}`` (the run's name), or the operation
    alone for an unnamed run."""
    return f"{OP_INVOKE_WORKFLOW} {name}" if name else OP_INVOKE_WORKFLOW


def is_root_span_name(name: str) -> bool:
    """Whether a span name is a causaltrace run root's: today's ``invoke_workflow …`` or the legacy
    ``causaltrace.run``."""
    return name == LEGACY_ROOT_SPAN_NAME or name == OP_INVOKE_WORKFLOW or name.startswith(OP_INVOKE_WORKFLOW + " ")


def is_client_span(kind: str) -> bool:
    """Whether the span of a step of this kind is a CLIENT span (a model call) rather than INTERNAL."""
    return kind in CLIENT_STEP_KINDS


def error_type_of(reason: str | None) -> str:
    """``error.type`` from an error text: the exception class name that starts it (``"ValueError: …"``), else
    ``_OTHER``."""
    head, colon, _ = (reason or "").partition(":")
    head = head.strip()
    if colon and head and head.replace(".", "").replace("_", "").isalnum() and " " not in head:
        return head
    return ERROR_TYPE_OTHER


#: A structured attribute as compact JSON (:func:`causaltrace.recording.long_texts.attribute_json`); with a limit,
#: a longer text in it comes cut as the payload policy cuts it, never written whole (issue 35 "Bad input").
_dumps = functools.partial(attribute_json, marker=TRUNCATION_MARKER)


def step_attributes(step: Step, into: dict[str, Any] | None = None, *, cut_at: int | None = None) -> dict[str, Any]:
    """The span attributes of a step, in full (the payload policy is applied afterwards by the emitter); written
    into ``into`` when given (the span's own dict: no second dict to build and merge per step); with ``cut_at``, a
    JSON attribute holding a longer text comes already cut to it (``recording.long_texts.CutText``)."""
    attrs: dict[str, Any] = {} if into is None else into
    attrs[STEP_ID] = step.step_id
    attrs[STEP_INDEX] = step.index
    attrs[STEP_KIND] = step.kind
    attrs[STEP_AGENT] = step.agent
    attrs[RUN_ID] = step.run_id
    attrs[STEP_STATUS] = step.status
    attrs[STEP_CONTENT] = step.content
    attrs[GEN_AI_AGENT_NAME] = step.agent  # every step span, its agent's name ("" when no agent is known)
    operation = OPERATION_BY_STEP.get(step.kind)
    if operation is not None:  # a GenAI operation (_genai_operation's attributes, inline: most steps are one)
        attrs[GEN_AI_OPERATION_NAME] = operation
        attrs[GEN_AI_CONVERSATION_ID] = step.run_id
        if operation == OP_CHAT:  # a model call's provider, response model and finish reasons
            meta = step.metadata
            provider = meta.get("provider") if meta else None
            attrs[GEN_AI_PROVIDER_NAME] = provider if isinstance(provider, str) and provider else provider_name(
                step.model)
            outputs = step.outputs
            if outputs:
                response_model = outputs.get("response_model")
                if isinstance(response_model, str) and response_model:
                    attrs[GEN_AI_RESPONSE_MODEL] = response_model
                finish = outputs.get("finish_reason")
                if finish is not None:
                    attrs[GEN_AI_RESPONSE_FINISH_REASONS] = [str(f) for f in finish] if isinstance(finish, list) \
                        else [str(finish)]
        elif operation == OP_EXECUTE_TOOL:
            attrs[GEN_AI_TOOL_TYPE] = TOOL_TYPE_FUNCTION
    if step.parent_step_id:
        attrs[STEP_PARENT_ID] = step.parent_step_id
    if step.inputs:
        attrs[STEP_INPUTS] = _dumps(step.inputs, cut_at)
    if step.outputs:
        attrs[STEP_OUTPUTS] = _dumps(step.outputs, cut_at)
    if step.model is not None:
        attrs[GEN_AI_REQUEST_MODEL] = step.model
    if step.usage is not None:
        attrs[GEN_AI_USAGE_INPUT_TOKENS] = step.usage.input_tokens
        attrs[GEN_AI_USAGE_OUTPUT_TOKENS] = step.usage.output_tokens
    if step.tool_name is not None:
        attrs[GEN_AI_TOOL_NAME] = step.tool_name
    if step.call_id is not None:
        attrs[GEN_AI_TOOL_CALL_ID] = step.call_id
    if step.arguments is not None:
        attrs[STEP_ARGUMENTS] = _dumps(step.arguments, cut_at)
    if step.error is not None:
        attrs[STEP_ERROR_TYPE] = step.error.type
        attrs[STEP_ERROR_MESSAGE] = step.error.message
        attrs[ERROR_TYPE] = step.error.type or ERROR_TYPE_OTHER
    elif step.status == "error":
        attrs[ERROR_TYPE] = ERROR_TYPE_OTHER
    if step.action_signature is not None:
        attrs[STEP_ACTION_SIGNATURE] = step.action_signature
    if step.metadata:
        attrs[STEP_METADATA] = _dumps(step.metadata, cut_at)
    if step.truncated:
        attrs[STEP_TRUNCATED] = True
    if step.source is not None:
        attrs.update(_source_attributes(step.source))
    if step.depends_on:
        attrs[DEPENDS_ON_STEP_IDS] = list(map(_STEP_ID_OF, step.depends_on))
        attrs[DEPENDS_ON_KINDS] = list(map(_KIND_OF, step.depends_on))
    return attrs


_STEP_ID_OF = operator.attrgetter("step_id")
_KIND_OF = operator.attrgetter("kind")


def _source_attributes(source: StepSource) -> dict[str, Any]:
    """``Step.source`` as ``causaltrace.source.*`` attributes (times as ISO text; unset fields left out)."""
    values = {SOURCE_TRACE_ID: source.trace_id, SOURCE_SPAN_ID: source.span_id, SOURCE_SPAN_KIND: source.span_kind,
              SOURCE_START_TIME: source.start_time.isoformat() if source.start_time else None,
              SOURCE_END_TIME: source.end_time.isoformat() if source.end_time else None}
    return {k: v for k, v in values.items() if v is not None}


def _source_of(attrs: Mapping[str, Any]) -> StepSource | None:
    """The ``causaltrace.source.*`` attributes back as a StepSource, or None when there are none."""
    keys = (SOURCE_TRACE_ID, SOURCE_SPAN_ID, SOURCE_START_TIME, SOURCE_END_TIME, SOURCE_SPAN_KIND)
    if not any(k in attrs for k in keys):
        return None
    return StepSource(trace_id=attrs.get(SOURCE_TRACE_ID), span_id=attrs.get(SOURCE_SPAN_ID),
                      start_time=attrs.get(SOURCE_START_TIME), end_time=attrs.get(SOURCE_END_TIME),
                      span_kind=attrs.get(SOURCE_SPAN_KIND))


#: ``openinference_attributes(final_answer=...)`` not given: a root's answer is read back from its outcome's JSON.
PARSE_OUTCOME: Any = object()


def openinference_attributes(
    attrs: dict[str, Any], *, messages: Any = None, inputs_hidden: bool = False, outputs_hidden: bool = False,
    output_messages: bool = True, final_answer: Any = PARSE_OUTCOME, content: bool = True,
) -> dict[str, Any]:
    """Add the OpenInference attributes (what Phoenix reads) to a step's or run's span attributes; returns ``attrs``.

    They are derived from the ``causaltrace.*`` / ``gen_ai.*`` attributes already in ``attrs`` — AFTER hiding and
    redaction, before truncation — so they never show more than the payload policy lets through, and the JSON
    texts are the very same strings (no second encoding, cut alike). A step span: ``input.value`` is its call
    arguments (JSON) if any, else its inputs (JSON), else a task's text; ``output.value`` its text if any, else its
    outputs (JSON). The root span: the task in, the final answer out. ``messages`` (a model call's request
    messages, given only where the policy shows inputs unredacted) become ``llm.input_messages.{i}.*``. With
    ``inputs_hidden`` a task's text (the run's input) is not shown as an input either; with ``outputs_hidden`` the
    root shows no final answer (the outcome it is read from is kept for the importers). ``output_messages=False``:
    a model call's ``llm.output_messages.*`` are not written (its adapter gives its own, which replace them);
    ``final_answer``: the root's, when the caller knows it (its outcome attribute unchanged). ``content=False``
    (OpenInference content off, ``CAUSALTRACE_CAPTURE_CONTENT=off``): no input / output values, messages or tool
    parameters are written at all (rather than written, then dropped).
    """
    kind = attrs[STEP_KIND] if STEP_KIND in attrs else None
    if kind is None:
        if RUN_ID in attrs:
            _root_openinference(attrs, outputs_hidden, final_answer, content)
        return attrs
    # (keys read with ``in`` and ``[]``: no method call each, every step span comes here)
    attrs[OI_SPAN_KIND] = OPENINFERENCE_SPAN_KIND_BY_STEP[kind] if kind in OPENINFERENCE_SPAN_KIND_BY_STEP else "CHAIN"
    attrs[OI_SESSION_ID] = attrs[RUN_ID] if RUN_ID in attrs else None
    merged = RESULT_ID in attrs  # a tool call and its result: the output is the result's
    if content:
        source = (attrs[STEP_ARGUMENTS] if STEP_ARGUMENTS in attrs else None) or (
            attrs[STEP_INPUTS] if STEP_INPUTS in attrs else None)
        if source is not None:
            attrs[OI_INPUT_VALUE] = source
            attrs[OI_INPUT_MIME_TYPE] = MIME_JSON
        elif kind == "task" and STEP_CONTENT in attrs and attrs[STEP_CONTENT] and not inputs_hidden:
            attrs[OI_INPUT_VALUE] = attrs[STEP_CONTENT]
            attrs[OI_INPUT_MIME_TYPE] = MIME_TEXT
        text = RESULT_CONTENT if merged else STEP_CONTENT
        text = attrs[text] if text in attrs else None
        if text:
            attrs[OI_OUTPUT_VALUE] = text
            attrs[OI_OUTPUT_MIME_TYPE] = MIME_TEXT
        elif (RESULT_OUTPUTS if merged else STEP_OUTPUTS) in attrs:
            attrs[OI_OUTPUT_VALUE] = attrs[RESULT_OUTPUTS if merged else STEP_OUTPUTS]
            attrs[OI_OUTPUT_MIME_TYPE] = MIME_JSON
    if kind == "llm_response":  # a model call's llm.* attributes: model, token counts, its request messages (every
        # one, no cap; only when given: a step written by hand with inputs["messages"], the adapters give theirs as
        # span attributes) and its answer as the one output message
        if GEN_AI_REQUEST_MODEL in attrs and attrs[GEN_AI_REQUEST_MODEL] is not None:
            attrs[OI_LLM_MODEL_NAME] = attrs[GEN_AI_REQUEST_MODEL]
        prompt = attrs[GEN_AI_USAGE_INPUT_TOKENS] if GEN_AI_USAGE_INPUT_TOKENS in attrs else None
        completion = attrs[GEN_AI_USAGE_OUTPUT_TOKENS] if GEN_AI_USAGE_OUTPUT_TOKENS in attrs else None
        if prompt is not None or completion is not None:
            attrs[OI_LLM_TOKEN_COUNT_PROMPT] = prompt or 0
            attrs[OI_LLM_TOKEN_COUNT_COMPLETION] = completion or 0
            attrs[OI_LLM_TOKEN_COUNT_TOTAL] = (prompt or 0) + (completion or 0)
        if content and isinstance(messages, list):
            _input_messages(attrs, messages)
        if output_messages and content and STEP_CONTENT in attrs and attrs[STEP_CONTENT]:
            attrs[f"{OI_LLM_OUTPUT_MESSAGES}.0.{OI_MESSAGE_ROLE}"] = "assistant"
            attrs[f"{OI_LLM_OUTPUT_MESSAGES}.0.{OI_MESSAGE_CONTENT}"] = attrs[STEP_CONTENT]
    if GEN_AI_TOOL_NAME in attrs and attrs[GEN_AI_TOOL_NAME] is not None:
        attrs[OI_TOOL_NAME] = attrs[GEN_AI_TOOL_NAME]
        if content and STEP_ARGUMENTS in attrs:
            attrs[OI_TOOL_PARAMETERS] = attrs[STEP_ARGUMENTS]
    return attrs


def _root_openinference(attrs: dict[str, Any], outputs_hidden: bool, answer: Any = PARSE_OUTCOME,
                        content: bool = True) -> None:
    """The run root's OpenInference attributes: CHAIN, the run id as session, the task in, the final answer out
    (``answer``, else read back from the outcome's JSON); with ``content`` off, neither of those two."""
    attrs[OI_SPAN_KIND] = OPENINFERENCE_SPAN_KIND_ROOT
    attrs[OI_SESSION_ID] = attrs[RUN_ID]
    if not content:
        return
    if attrs.get(RUN_TASK) is not None:
        attrs[OI_INPUT_VALUE] = attrs[RUN_TASK]
        attrs[OI_INPUT_MIME_TYPE] = MIME_TEXT
    outcome = attrs.get(RUN_OUTCOME)
    if isinstance(outcome, str) and not outputs_hidden:
        if answer is PARSE_OUTCOME:
            try:
                answer = json.loads(outcome).get("final_answer")
            except (ValueError, AttributeError):  # cut by the payload policy, or redacted into something else
                answer = None
        elif isinstance(answer, str):
            answer = utf8_safe(answer)  # as its outcome's JSON holds it
        if isinstance(answer, str):
            attrs[OI_OUTPUT_VALUE] = answer
            attrs[OI_OUTPUT_MIME_TYPE] = MIME_TEXT


def _input_messages(attrs: dict[str, Any], messages: list[Any]) -> None:
    """``llm.input_messages.{i}.*`` of a model call's request messages (a step written by hand)."""
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        prefix = f"{OI_LLM_INPUT_MESSAGES}.{i}."
        attrs[prefix + OI_MESSAGE_ROLE] = str(message.get("role") or message.get("source") or "")
        text = message.get("content")
        if text is not None:
            attrs[prefix + OI_MESSAGE_CONTENT] = text if isinstance(text, str) else _dumps(text)


def _loads(attrs: Mapping[str, Any], key: str, field: str) -> Any:
    raw = attrs.get(key)
    if raw is None:
        return None
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        # A truncated JSON payload cannot be parsed: keep the text so nothing is lost, and say so.
        if "causaltrace: truncated" in raw:
            return {"_truncated_json": raw}
        raise ValueError(f"attribute {key!r} ({field}) is not valid JSON: {exc}") from exc


def _as_list(raw: Any, key: str) -> list[Any]:
    """A list attribute; some backends store arrays as JSON text."""
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"attribute {key!r} is neither a list nor JSON text of one") from exc
        if not isinstance(value, list):
            raise ValueError(f"attribute {key!r} is not a list")
        return value
    return list(raw)


def _is_truncated(attrs: Mapping[str, Any]) -> bool:
    if attrs.get(STEP_TRUNCATED):
        return True
    return any(isinstance(v, str) and "causaltrace: truncated" in v for v in attrs.values())


def step_from_attributes(
    attrs: Mapping[str, Any],
    *,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    span_id: str | None = None,
) -> Step:
    """Rebuild a Step from a step span's attributes (the inverse of :func:`step_attributes`).

    Raises ``ValueError`` naming the attribute when a required one is missing or malformed. A step whose
    attributes were cut by a payload limit comes back with ``truncated=True``.
    """
    for key in (STEP_ID, STEP_INDEX, STEP_KIND, RUN_ID):
        if key not in attrs:
            raise ValueError(f"span attribute {key!r} is missing")
    ids = _as_list(attrs.get(DEPENDS_ON_STEP_IDS), DEPENDS_ON_STEP_IDS)
    kinds = _as_list(attrs.get(DEPENDS_ON_KINDS), DEPENDS_ON_KINDS)
    if len(ids) != len(kinds):
        raise ValueError(f"{DEPENDS_ON_STEP_IDS!r} and {DEPENDS_ON_KINDS!r} differ in length")
    usage = None
    if GEN_AI_USAGE_INPUT_TOKENS in attrs or GEN_AI_USAGE_OUTPUT_TOKENS in attrs:
        usage = TokenUsage(
            input_tokens=int(attrs.get(GEN_AI_USAGE_INPUT_TOKENS, 0)),
            output_tokens=int(attrs.get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)),
        )
    error = None
    if STEP_ERROR_TYPE in attrs:
        error = StepError(type=str(attrs[STEP_ERROR_TYPE]), message=str(attrs.get(STEP_ERROR_MESSAGE, "")))
    return Step(
        step_id=str(attrs[STEP_ID]),
        run_id=str(attrs[RUN_ID]),
        index=int(attrs[STEP_INDEX]),
        kind=attrs[STEP_KIND],
        agent=str(attrs.get(STEP_AGENT, "")),
        parent_step_id=attrs.get(STEP_PARENT_ID),
        depends_on=tuple(Dependency(step_id=str(i), kind=k) for i, k in zip(ids, kinds, strict=True)),
        content=str(attrs.get(STEP_CONTENT, "")),
        inputs=_loads(attrs, STEP_INPUTS, "inputs") or {},
        outputs=_loads(attrs, STEP_OUTPUTS, "outputs") or {},
        usage=usage,
        model=attrs.get(GEN_AI_REQUEST_MODEL),
        tool_name=attrs.get(GEN_AI_TOOL_NAME),
        arguments=_loads(attrs, STEP_ARGUMENTS, "arguments"),
        call_id=attrs.get(GEN_AI_TOOL_CALL_ID),
        started_at=started_at,
        ended_at=ended_at,
        status=attrs.get(STEP_STATUS, "unset"),
        error=error,
        action_signature=attrs.get(STEP_ACTION_SIGNATURE),
        truncated=_is_truncated(attrs),
        span_id=span_id,
        metadata=_loads(attrs, STEP_METADATA, "metadata") or {},
        source=_source_of(attrs),
    )


def run_attributes(
    *,
    run_id: str,
    framework: str,
    name: str | None = None,
    task: str | None = None,
    agents: tuple[str, ...] = (),
    outcome: Outcome | None = None,
    metadata: Mapping[str, Any] | None = None,
    annotations: Annotations | None = None,
    recording: Recording | None = None,
    started_at: datetime | None = None,
    ended_at: datetime | None = None,
    cut_at: int | None = None,
) -> dict[str, Any]:
    """The root span's ``causaltrace.run.*`` attributes (JSON-encoded where structured); ``cut_at``: a longer final
    answer or reason comes cut, as in :func:`step_attributes`."""
    attrs: dict[str, Any] = {
        RUN_ID: run_id,
        RUN_FRAMEWORK: framework,
        GEN_AI_OPERATION_NAME: OP_INVOKE_WORKFLOW,
        GEN_AI_CONVERSATION_ID: run_id,
    }
    if name is not None:
        attrs[RUN_NAME] = name
        attrs[GEN_AI_WORKFLOW_NAME] = name
    if task is not None:
        attrs[RUN_TASK] = task
    if agents:
        attrs[RUN_AGENTS] = list(agents)
    if outcome is not None:
        cut = None if cut_at is None else cut_json(model_json_pieces(outcome, cut_at + 1), cut_at, TRUNCATION_MARKER)
        attrs[RUN_OUTCOME] = outcome.model_dump_json() if cut is None else cut
        attrs[RUN_STATUS] = outcome.status
        if outcome.status == "failure":
            attrs[ERROR_TYPE] = error_type_of(outcome.reason) if outcome.stop == "error" else ERROR_TYPE_OTHER
    if metadata:
        attrs[RUN_METADATA] = _dumps(dict(metadata))
    if annotations is not None:
        attrs[RUN_ANNOTATIONS] = annotations.model_dump_json()
    if recording is not None:
        attrs[RUN_RECORDING] = recording.model_dump_json()
    if started_at is not None:
        attrs[RUN_STARTED_AT] = started_at.isoformat()
    if ended_at is not None:
        attrs[RUN_ENDED_AT] = ended_at.isoformat()
    return attrs


def run_fields_from_attributes(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The Run fields a root span carries, as keyword arguments for ``Run(...)`` (steps excluded)."""
    if RUN_ID not in attrs:
        raise ValueError(f"root span attribute {RUN_ID!r} is missing")
    fields: dict[str, Any] = {"run_id": str(attrs[RUN_ID]), "framework": str(attrs.get(RUN_FRAMEWORK, "unknown"))}
    if RUN_NAME in attrs:
        fields["name"] = attrs[RUN_NAME]
    if RUN_TASK in attrs:
        fields["task"] = attrs[RUN_TASK]
    if RUN_AGENTS in attrs:
        fields["agents"] = tuple(attrs[RUN_AGENTS])
    structured = (
        (RUN_OUTCOME, "outcome", Outcome),
        (RUN_ANNOTATIONS, "annotations", Annotations),
        (RUN_RECORDING, "recording", Recording),
    )
    cut: list[str] = []
    for key, name, model in structured:
        if key not in attrs:
            continue
        try:
            fields[name] = model.model_validate_json(attrs[key])
        except ValueError:
            if "causaltrace: truncated" not in str(attrs[key]):
                raise
            cut.append(key)  # cut by a live payload limit: dropped, and said so in metadata
    if RUN_METADATA in attrs:
        meta = _loads(attrs, RUN_METADATA, "run metadata")
        if isinstance(meta, dict) and "_truncated_json" not in meta:
            fields["metadata"] = meta
        else:
            cut.append(RUN_METADATA)
    if cut:
        fields.setdefault("metadata", {})["causaltrace.truncated_attributes"] = cut
    if RUN_STARTED_AT in attrs:
        fields["started_at"] = datetime.fromisoformat(attrs[RUN_STARTED_AT])
    if RUN_ENDED_AT in attrs:
        fields["ended_at"] = datetime.fromisoformat(attrs[RUN_ENDED_AT])
    return fields
