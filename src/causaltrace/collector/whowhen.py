"""Import Who&When benchmark logs as Runs (ARCHITECTURE "Steps": the Who&When import mapping).

Who&When (Zhang et al., ICML 2025; FACTS.md "Who&When") holds 126 Algorithm-Generated and 58 Hand-Crafted
failed multi-agent logs, each a JSON file with the ``question``, the ``history`` of the conversation and the
ground-truth label (``mistake_agent``, ``mistake_step``, ``mistake_reason``).

Usage::

    from causaltrace.collector.whowhen import iter_whowhen, load_whowhen

    run = load_whowhen(Path("shared/data/whowhen/Hand-Crafted/30.json"))
    for run in iter_whowhen(Path("shared/data/whowhen"), subset="algo"):
        ...

Mapping (one Step per ``history`` entry, ``index`` = the entry's position; no containers, no parents). This module
is where Who&When's naming conventions live (issue 32 item 1): attribution reads only the kinds, values and
dependencies they are mapped to here, never a speaker's name.

* Hand-Crafted ``human`` → ``task``;
* a tool / terminal speaker (:mod:`causaltrace.collector.speakers`: by role, name pattern — ``Computer_terminal`` /
  ``ComputerTerminal`` are one case — or content shape) → ``tool_response``, outputs ``{result, is_error: False}``;
* ``Orchestrator (thought)`` → ``reasoning``, outputs ``{text}``;
* ``X (-> Y)`` (an instruction to ``Y``) → ``message``, outputs ``{text, target: Y}`` — the addressee is a value;
* everything else → ``message``, outputs ``{text}``; a message with a code block also gets inputs
  ``{code, language}`` (the first block).
* **Dependencies** are derived at import by the conversation's protocol rules over those kinds and values
  (:data:`causaltrace.collector.protocol_rules.CONVERSATION_RULES`: code → its terminal output ``executes``; an
  instruction → the addressed agent's next step ``saw``; the Orchestrator's thought → its instruction
  ``produced_by``; each step → the next ``saw``) and stored as each step's ``depends_on``; the run's
  ``metadata["dependencies"] = "derived"`` says they were derived, not captured live.
* A run stored before this mapping gave dependencies (no ``depends_on``, no targets) is brought to it at read time
  by :func:`current_form` (the diagnosis engine calls it), from the speaker labels and texts every stored run kept:
  nobody has to re-import, and a stored run's id, its step ids and its diagnoses stay valid.

The speaker is ``name`` (Algorithm-Generated) or ``role`` (Hand-Crafted); ``agent`` is its base name (the text
before " ("); ``metadata`` keeps the full ``speaker``, the entry's ``role`` and the speaker's type
(``speaker_role``: ``agent`` / ``tool`` / ``human`` for the task giver / ``system``). The Run is ``whowhen-algo-<n>`` /
``whowhen-hand-<n>`` (with ``content_id=True``, as ``causaltrace import`` loads logs into a store,
``whowhen-algo-<n>-<digest>``: 12 hex digits of the SHA-256 of the log's canonical JSON and label version, so
re-importing a log is idempotent and another log that happens to be named ``<n>.json`` never replaces it),
framework ``whowhen``, its outcome a ``failure`` with no final answer (every Who&When log is a failed run), and its
``annotations`` the label.

Decisions where the architecture is silent:

* ``Annotations.source`` names the folder: ``"Who&When Algorithm-Generated 12.json"``.
* ``Annotations.extra`` holds ``question_ID``, ``level``, ``is_correct`` (Algorithm-Generated) or
  ``is_corrected`` (Hand-Crafted), ``label_version`` (the data root's ``VERSION`` file, when present), plus
  ``subset`` (``algo`` / ``hand``), ``file_number``, and any other top-level key a file carries beyond the known
  ones (one Algorithm-Generated file has ``labels``, four Hand-Crafted files ``mistake_type``).
* A code block is recognised for the languages AG2's executors run: ``python``, ``py``, ``sh``, ``bash``,
  ``shell`` (the data holds ``python``, ``sh`` and one ``shell``); ``language`` is kept as written.
* ``action_signature`` = ``schema.action_signature(kind, target, content)`` where ``target`` is the addressee of an
  ``Orchestrator (-> X)`` message and empty otherwise.
* ``Run.agents`` lists the distinct agents in order of first appearance, without the Hand-Crafted ``human``.
* Step ids are ``<run_id>-s<index>`` (unique across runs, so stores may key on them).
* The subset is read off the folder name (``Algorithm-Generated`` / ``Hand-Crafted``); for a file elsewhere it is
  detected from the format (``name`` on history entries or a ``system_prompt`` → Algorithm-Generated).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from causaltrace.collector.protocol_rules import (
    DERIVED,
    DERIVED_KEY,
    dependencies_derived,
    derive_dependencies,
    speaker,
)
from causaltrace.collector.speakers import SYSTEM_ROLES, TOOL_ROLES, classify_speaker
from causaltrace.exceptions import InvalidInputError
from causaltrace.schema import Annotations, Outcome, Run, Step, action_signature

__all__ = [
    "SUBSET_DIRS",
    "agent_name",
    "content_digest",
    "current_form",
    "iter_whowhen",
    "load_whowhen",
    "whowhen_run_from_data",
]

#: Folder name of each subset, in the order ``subset="all"`` reads them.
SUBSET_DIRS: dict[str, str] = {"algo": "Algorithm-Generated", "hand": "Hand-Crafted"}
_DIR_TO_SUBSET = {v: k for k, v in SUBSET_DIRS.items()}

FRAMEWORK = "whowhen"
_ADDRESSED = re.compile(r"^(?P<base>.*?) \(-> (?P<target>.+)\)$")
_CODE_BLOCK = re.compile(r"```(?P<lang>python|py|sh|bash|shell)[ \t]*\r?\n(?P<code>.*?)```", re.DOTALL)
#: Top-level keys the mapping consumes; any other key is kept in ``annotations.extra``.
_KNOWN_KEYS = frozenset(
    {
        "question",
        "history",
        "mistake_agent",
        "mistake_step",
        "mistake_reason",
        "ground_truth",
        "system_prompt",
        "question_ID",
        "level",
        "is_correct",
        "is_corrected",
    }
)


def load_whowhen(path: Path, *, content_id: bool = False) -> Run:
    """Load one Who&When log file as a Run (mapping in the module docstring).

    ``content_id=True`` (what ``causaltrace import`` uses) appends a digest of the log's content to the run id,
    so another file with the same name never takes a stored run's id. Raises :class:`InvalidInputError` naming the
    file and the field when the file is unreadable or malformed.
    """
    path = Path(path)
    data = _read_json(path)
    subset = _subset_of(path, data)
    return _build_run(path, data, subset, _label_version(path), content_id=content_id)


def iter_whowhen(
    data_dir: Path, subset: Literal["algo", "hand", "all"] = "all", *, content_id: bool = False
) -> Iterator[Run]:
    """Yield the Runs of a Who&When data folder: files in numeric file-number order, Algorithm-Generated first.

    ``data_dir`` is the folder holding ``Algorithm-Generated/`` and ``Hand-Crafted/`` (and ``VERSION``), or one of
    those two folders itself (then only its subset is read, and none when ``subset`` names the other).
    ``content_id`` as for :func:`load_whowhen`. Raises :class:`InvalidInputError` when a requested subset folder is
    missing or a file is malformed.
    """
    data_dir = Path(data_dir)
    if subset not in ("algo", "hand", "all"):
        raise InvalidInputError(f"subset must be 'algo', 'hand' or 'all', not {subset!r}")
    folders: list[tuple[str, Path]]
    own = _DIR_TO_SUBSET.get(data_dir.name)
    if own is not None and not any((data_dir / d).is_dir() for d in SUBSET_DIRS.values()):
        # pointed at one subset folder itself
        folders = [(own, data_dir)] if subset in ("all", own) else []
        version = _read_version(data_dir.parent)
    else:
        keys = ("algo", "hand") if subset == "all" else (subset,)
        folders = [(key, data_dir / SUBSET_DIRS[key]) for key in keys]
        version = _read_version(data_dir)
    for key, folder in folders:
        if not folder.is_dir():
            raise InvalidInputError(f"no Who&When {SUBSET_DIRS[key]} folder at {folder}")
        for file in sorted(folder.glob("*.json"), key=_file_order):
            yield _build_run(file, _read_json(file), key, version, content_id=content_id)


def whowhen_run_from_data(data: dict[str, Any], path: Path, *, require_labels: bool = True, content_id: bool = False) -> Run:
    """A Run from an already parsed Who&When-shaped object; ``path`` names it (subset, file number, messages).

    ``require_labels=False`` (what ``causaltrace import --format chat`` uses) accepts a log without
    ``mistake_step`` / ``mistake_agent``: the Run then has no annotations (it is simply diagnosable) and keeps the
    log's other top-level keys in ``metadata["whowhen"]``; a label that IS present is still checked.
    """
    path = Path(path)
    return _build_run(path, data, _subset_of(path, data), _label_version(path), content_id=content_id,
                      require_labels=require_labels)


# ------------------------------------------------------------------------------------------------ internals


def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object of one log file; an unreadable, malformed or too deeply nested file is an InvalidInputError
    naming the file (a RecursionError from the decoder never escapes)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInputError(f"{path}: cannot read the Who&When file: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"{path}: not valid JSON: {exc}") from exc
    except RecursionError:
        raise InvalidInputError(f"{path}: JSON nested too deeply (beyond the recursion limit); not a Who&When log") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _file_order(path: Path) -> tuple[int, int, str]:
    stem = path.stem
    return (0, int(stem), stem) if stem.isdigit() else (1, 0, stem)


def _read_version(data_dir: Path) -> str | None:
    try:
        text = (data_dir / "VERSION").read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None


def _label_version(path: Path) -> str | None:
    """VERSION of the data root: the folder above the subset folder (or the file's own folder)."""
    return _read_version(path.parent.parent) or _read_version(path.parent)


def _subset_of(path: Path, data: dict[str, Any]) -> str:
    by_dir = _DIR_TO_SUBSET.get(path.parent.name)
    if by_dir is not None:
        return by_dir
    history = data.get("history")
    if "system_prompt" in data or "is_correct" in data:
        return "algo"
    if isinstance(history, list) and any(isinstance(e, dict) and "name" in e for e in history):
        return "algo"
    return "hand"


#: what an imported log (labels optional) with one of its two labels is told: the other makes it a labelled log
_BOTH_OR_NEITHER = (": a labelled log gives both mistake_agent and mistake_step, a log to diagnose gives neither")


def _fail(path: Path, field: str, problem: str) -> InvalidInputError:
    return InvalidInputError(f"{path}: field {field!r} {problem}")


def _opt_str(path: Path, data: dict[str, Any], field: str) -> str | None:
    value = data.get(field)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _fail(path, field, f"must be a string, got {type(value).__name__}")


def _mistake_step(path: Path, data: dict[str, Any], n_steps: int, hint: str = "") -> int:
    if "mistake_step" not in data:
        raise _fail(path, "mistake_step", f"is missing{hint}")
    raw = data["mistake_step"]
    if isinstance(raw, bool):
        raise _fail(path, "mistake_step", f"is not an integer: {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str) and re.fullmatch(r"\s*\d+\s*", raw):
        value = int(raw)
    else:
        raise _fail(path, "mistake_step", f"is not an integer: {raw!r}")
    if not 0 <= value < n_steps:
        raise _fail(path, "mistake_step", f"is {value}, outside the history (0..{n_steps - 1})")
    return value


def _speaker_roles(history: list[Any], speaker_key: str) -> dict[str, str]:
    """Each speaker's type (:func:`causaltrace.collector.speakers.classify_speaker`): by the entries' role, the
    speaker's name, and the shape of all its messages. The entry role of Algorithm-Generated logs is the chat
    role AG2 gave the message (``user`` / ``assistant``), not a speaker type, so only its tool roles count."""
    contents: dict[str, list[str]] = {}
    roles: dict[str, str | None] = {}
    for entry in history:
        if not isinstance(entry, dict) or not isinstance(entry.get(speaker_key), str):
            continue
        name = entry[speaker_key]
        contents.setdefault(name, []).append(entry["content"] if isinstance(entry.get("content"), str) else "")
        role = entry.get("role") if speaker_key == "name" else None
        if isinstance(role, str) and role.lower() in TOOL_ROLES | SYSTEM_ROLES:
            roles[name] = role
    return {name: classify_speaker(name, roles.get(name), texts) for name, texts in contents.items()}


def _step_kind(speaker: str, subset: str, speaker_role: str) -> str:
    if subset == "hand" and speaker == "human":
        return "task"
    if speaker_role == "tool":  # the Who&When terminals are one case of the generic typing (collector.speakers)
        return "tool_response"
    if speaker == "Orchestrator (thought)":
        return "reasoning"
    return "message"


def _build_step(run_id: str, index: int, entry: dict[str, Any], speaker: str, subset: str,
                speaker_role: str = "agent") -> Step:
    content = entry["content"]
    kind = _step_kind(speaker, subset, speaker_role)
    agent = agent_name(speaker)
    addressed = _ADDRESSED.match(speaker)
    target = addressed.group("target") if addressed else None
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any]
    if kind == "tool_response":
        outputs = {"result": content, "is_error": False}
    elif kind == "task":
        outputs = {}
    else:
        outputs = {"text": content}
        if kind == "message":
            if target is not None:
                outputs["target"] = target  # the instruction's addressee, a value attribution reads
            block = _CODE_BLOCK.search(content)
            if block is not None:
                inputs = {"code": block.group("code"), "language": block.group("lang")}
    metadata: dict[str, Any] = {"speaker": speaker, "speaker_role": "human" if kind == "task" else speaker_role}
    if "role" in entry:
        metadata["role"] = entry["role"]
    return Step(
        step_id=f"{run_id}-s{index}",
        run_id=run_id,
        index=index,
        kind=kind,  # type: ignore[arg-type]
        agent=agent,
        content=content,
        inputs=inputs,
        outputs=outputs,
        action_signature=action_signature(kind, target, content),
        metadata=metadata,
    )


def agent_name(speaker: str) -> str:
    """The agent of a Who&When speaker label, as the labels name it: the text before ``" ("``
    (``"Orchestrator (-> WebSurfer)"`` → ``Orchestrator``)."""
    return speaker.split(" (", 1)[0]


def content_digest(data: dict[str, Any], label_version: str | None) -> str:
    """12 hex digits of the SHA-256 of a log's canonical JSON (sorted keys) and its label version: the same log
    gives the same digest wherever its file lies and however it is formatted; another log, another digest."""
    canonical = json.dumps([data, label_version], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _build_run(
    path: Path,
    data: dict[str, Any],
    subset: str,
    label_version: str | None,
    *,
    content_id: bool = False,
    require_labels: bool = True,
) -> Run:
    n = path.stem
    run_id = f"whowhen-{subset}-{n}"
    if content_id:
        run_id += f"-{content_digest(data, label_version)}"
    history = data.get("history")
    if history is None:
        raise _fail(path, "history", "is missing")
    if not isinstance(history, list):
        raise _fail(path, "history", f"must be a list, got {type(history).__name__}")
    speaker_key = "name" if subset == "algo" else "role"
    roles = _speaker_roles(history, speaker_key)
    steps: list[Step] = []
    for i, entry in enumerate(history):
        if not isinstance(entry, dict):
            raise _fail(path, f"history[{i}]", f"must be an object, got {type(entry).__name__}")
        speaker = entry.get(speaker_key)
        if not isinstance(speaker, str) or not speaker:
            raise _fail(path, f"history[{i}].{speaker_key}", "is missing or not a non-empty string")
        if not isinstance(entry.get("content"), str):
            raise _fail(path, f"history[{i}].content", "is missing or not a string")
        if "role" in entry and not isinstance(entry["role"], str):
            raise _fail(path, f"history[{i}].role", "must be a string")
        steps.append(_build_step(run_id, i, entry, speaker, subset, roles.get(speaker, "agent")))

    labelled = require_labels or "mistake_step" in data or data.get("mistake_agent") is not None
    hint = "" if require_labels else _BOTH_OR_NEITHER  # a benchmark file needs both; an imported log may have none
    mistake_step = _mistake_step(path, data, len(history), hint) if labelled else None
    if labelled and data.get("mistake_agent") is None:
        raise _fail(path, "mistake_agent", f"is missing{hint}")
    extra: dict[str, Any] = {"subset": subset, "file_number": int(n) if n.isdigit() else n}
    for key in ("question_ID", "level", "is_correct" if subset == "algo" else "is_corrected"):
        if key in data:
            extra[key] = data[key]
    for key, value in data.items():
        if key not in _KNOWN_KEYS:
            extra[key] = value
    if label_version is not None:
        extra["label_version"] = label_version
    annotations = None if not labelled else Annotations(
        mistake_agent=_opt_str(path, data, "mistake_agent"),
        mistake_step=mistake_step,
        mistake_reason=_opt_str(path, data, "mistake_reason"),
        ground_truth=_opt_str(path, data, "ground_truth"),
        source=f"Who&When {SUBSET_DIRS[subset]} {path.name}",
        extra=extra,
    )
    metadata: dict[str, Any] = {} if labelled else {"whowhen": extra}
    if subset == "algo" and "system_prompt" in data:
        prompts = data["system_prompt"]
        if not isinstance(prompts, dict):
            raise _fail(path, "system_prompt", f"must be an object, got {type(prompts).__name__}")
        metadata["system_prompts"] = prompts
    steps = derive_dependencies(steps)
    metadata[DERIVED_KEY] = DERIVED
    agents: list[str] = []
    for step in steps:
        if step.kind != "task" and step.agent not in agents:
            agents.append(step.agent)
    try:
        return Run(
            run_id=run_id,
            framework=FRAMEWORK,
            task=_opt_str(path, data, "question"),
            agents=tuple(agents),
            steps=tuple(steps),
            outcome=Outcome(status="failure", final_answer=None),
            metadata=metadata,
            annotations=annotations,
        )
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        raise InvalidInputError(f"{path}: not a valid Who&When log: {exc}") from exc


def current_form(run: Run) -> Run:
    """``run`` as this importer builds it today (module docstring, last point). A Who&When run stored before its
    dependencies were derived at import (no ``depends_on``, no marker) is re-mapped from the speaker labels
    (``metadata["speaker"]``) and texts it kept — kinds, values, speaker types, dependencies — keeping its ids and
    every other field; any other run, and a current one, is returned unchanged."""
    if run.framework != FRAMEWORK or dependencies_derived(run) or any(s.depends_on for s in run.steps):
        return run
    subset = _stored_subset(run)
    speaker_key = "name" if subset == "algo" else "role"
    entries: list[dict[str, Any]] = []
    for step in run.steps:
        entry: dict[str, Any] = {speaker_key: speaker(step), "content": step.content}
        if isinstance(step.metadata.get("role"), str):
            entry["role"] = step.metadata["role"]
        entries.append(entry)
    roles = _speaker_roles(entries, speaker_key)
    rebuilt = []
    for step, entry in zip(run.steps, entries, strict=True):
        label = entry[speaker_key]
        new = _build_step(run.run_id, step.index, entry, label, subset, roles.get(label, "agent"))
        rebuilt.append(step.model_copy(update={
            "kind": new.kind, "agent": step.agent or new.agent, "inputs": new.inputs, "outputs": new.outputs,
            "action_signature": new.action_signature, "metadata": {**step.metadata, **new.metadata}}))
    return run.model_copy(update={"steps": tuple(derive_dependencies(rebuilt)),
                                  "metadata": {**run.metadata, DERIVED_KEY: DERIVED}})


def _stored_subset(run: Run) -> str:
    """The subset of a stored run: its label's, its unlabelled log's, its id's (``whowhen-hand-…``)."""
    extra = run.annotations.extra if run.annotations is not None else run.metadata.get("whowhen")
    subset = extra.get("subset") if isinstance(extra, dict) else None
    if subset in SUBSET_DIRS:
        return str(subset)
    return "hand" if run.run_id.startswith("whowhen-hand-") else "algo"
