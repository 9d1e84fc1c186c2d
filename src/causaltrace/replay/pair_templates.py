"""Does a chat template keep a repair pair's difference? ``pairs export --check-template PATH`` (issue 33 item 8).

A pair teaches only if its chosen and rejected turns reach the model as different text. Many of them differ only in
a tool call — one call's arguments, a transfer call's name — and a chat template without tool support renders an
assistant turn's ``content`` and nothing else: SmolLM2's template renders such a pair's two sides as the same text,
and a trainer then prefers a sequence over itself. The rule: **a template must render ``tool_calls`` and ``tool``
messages**. :func:`check_rows` renders each exported row's prompt + chosen and prompt + rejected and reports the pairs
whose two renderings are the same (and the ones the template cannot render at all).

Where a template comes from (:func:`load_template`):

* a ``.gguf`` file — the ``tokenizer.chat_template`` of its metadata (and ``tokenizer.chat_template.<name>``), the
  BOS / EOS / UNK / PAD token texts from its vocabulary; the name ``smollm2`` means the SmolLM2-135M GGUF that
  ``scripts/install_local_model.sh`` installs (located as ``--model local`` locates it,
  :func:`causaltrace.attribution.local_model.gguf_path`);
* a ``tokenizer_config.json`` (any ``.json``) — its ``chat_template`` (a string, or Hugging Face's list of named
  templates), else the ``chat_template.jinja`` beside it, with its special tokens;
* any other file — the template's text (a ``.jinja`` file).

GGUF metadata is read with the ``gguf`` package (llama.cpp's own reader, pure Python, no model or native library
loaded; the ``templates`` extra). Measured on the 98 MB SmolLM2 GGUF on this machine: about 7 s, as it parses the
whole 49,152-token vocabulary; ``llama_cpp.Llama(vocab_only=True)`` reads it in 0.3 s but needs the natively built
llama-cpp-python and writes llama.cpp's log lines to stderr.

Rendering is Hugging Face's ``apply_chat_template``: a jinja2 ``ImmutableSandboxedEnvironment`` with ``trim_blocks``
and ``lstrip_blocks``, the ``loopcontrols`` extension, ``{% generation %}`` blocks rendered as their body, a
``tojson`` that keeps non-ASCII text, ``raise_exception`` and ``strftime_now``; the variables are ``messages``,
``tools`` (the row's list of JSON schemas; ``None`` when it has none), ``add_generation_prompt=False`` and the
special tokens. A template is user input: whatever it raises while rendering one pair is reported for that pair.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from causaltrace.collector.safe_input import loads, refuse_special_file
from causaltrace.exceptions import MissingExtraError, UserError

__all__ = ["SMOLLM2", "ChatTemplate", "TemplateCheck", "TemplateVerdict", "check_rows", "load_template"]

#: The name that means the installed SmolLM2 GGUF.
SMOLLM2 = "smollm2"
#: The special tokens a template may use, as Hugging Face passes them.
_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token")
#: GGUF vocabulary ids of the special tokens (``tokenizer.ggml.<name>_id``).
_GGUF_TOKEN_IDS = {"bos_token": "bos_token", "eos_token": "eos_token", "unk_token": "unknown_token",
                   "pad_token": "padding_token", "sep_token": "seperator_token", "cls_token": "cls_token",
                   "mask_token": "mask_token"}
_GGUF_TEMPLATE = "tokenizer.chat_template"


class _TemplateRaised(Exception):
    """``raise_exception(...)`` called by a template."""


def _raise_exception(message: Any) -> None:
    raise _TemplateRaised(str(message))


def _tojson(value: Any, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _environment() -> Any:
    """The sandboxed environment Hugging Face renders chat templates in (module docstring)."""
    from jinja2.ext import Extension, loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(Extension):
        """``{% generation %}…{% endgeneration %}`` (HF's assistant-mask marker): the body, rendered as it is."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            from jinja2 import nodes

            return nodes.Scope(body, lineno=lineno)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template ready to render: its named sources (``default``, maybe ``tool_use``) and special tokens."""

    name: str
    sources: dict[str, str]
    tokens: dict[str, str] = field(default_factory=dict)
    compiled: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        """The text of ``messages`` under this template (Hugging Face's choice of ``tool_use`` when tools are given)."""
        key = "tool_use" if tools and "tool_use" in self.compiled else "default"
        template = self.compiled.get(key) or next(iter(self.compiled.values()))
        return template.render(messages=messages, tools=tools or None, documents=None, add_generation_prompt=False,
                               **self.tokens)


def _compiled(name: str, sources: dict[str, str], tokens: dict[str, str]) -> ChatTemplate:
    try:
        import jinja2
    except ImportError as exc:
        raise MissingExtraError("jinja2", "templates") from exc

    env = _environment()
    compiled = {}
    for key, text in sources.items():
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"{name}: the chat template {key!r} is empty or not text")
        try:
            compiled[key] = env.from_string(text)
        except jinja2.TemplateSyntaxError as exc:
            raise UserError(f"{name}: the chat template {key!r} is not valid Jinja ({exc.message}, line "
                            f"{exc.lineno})") from None
    return ChatTemplate(name=name, sources=dict(sources), tokens=tokens, compiled=compiled)


def _token_text(value: Any) -> str | None:
    """A tokenizer_config token entry: a string or an ``AddedToken`` dict with ``content``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _from_tokenizer_config(path: Path) -> ChatTemplate:
    try:
        config = loads(path.read_bytes(), str(path))
    except OSError as exc:
        raise UserError(f"cannot read the template {str(path)!r}: {exc.strerror or exc}") from None
    if not isinstance(config, dict):
        raise UserError(f"{path}: not a tokenizer_config.json (not a JSON object)")
    tokens = {k: t for k in _TOKEN_NAMES if (t := _token_text(config.get(k))) is not None}
    template = config.get("chat_template")
    if template is None and (path.parent / "chat_template.jinja").is_file():
        return _compiled(str(path), {"default": _read_text(path.parent / "chat_template.jinja")}, tokens)
    if isinstance(template, str):
        return _compiled(str(path), {"default": template}, tokens)
    if isinstance(template, list) and template and all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str)
            for t in template):
        return _compiled(str(path), {t["name"]: t["template"] for t in template}, tokens)
    if template is None:
        raise UserError(f"{path}: no chat_template (and no chat_template.jinja beside it)")
    raise UserError(f"{path}: chat_template is neither a string nor a list of named templates")


def _gguf_reader(path: Path) -> Any:
    try:
        from gguf import GGUFReader
    except ImportError as exc:
        raise MissingExtraError("gguf", "templates") from exc
    try:
        return GGUFReader(path, "r")
    except (ValueError, OSError, KeyError, IndexError, TypeError, NotImplementedError, MemoryError) as exc:
        raise UserError(f"{path}: not a readable GGUF file ({_first_line(exc)})") from None


def _from_gguf(path: Path, name: str) -> ChatTemplate:
    reader = _gguf_reader(path)
    fields = reader.fields
    sources = {"default" if key == _GGUF_TEMPLATE else key[len(_GGUF_TEMPLATE) + 1:]: fields[key].contents()
               for key in fields if key == _GGUF_TEMPLATE or key.startswith(_GGUF_TEMPLATE + ".")}
    if "default" not in sources:
        raise UserError(f"{path}: the GGUF metadata has no {_GGUF_TEMPLATE}")
    tokens: dict[str, str] = {}
    vocabulary = fields.get("tokenizer.ggml.tokens")
    for token, key in _GGUF_TOKEN_IDS.items():
        index = fields.get(f"tokenizer.ggml.{key}_id")
        if vocabulary is None or index is None:
            continue
        try:
            tokens[token] = str(vocabulary.contents(int(index.contents())))
        except (IndexError, ValueError, TypeError):
            continue  # an id outside the vocabulary: the template gets no such token, as transformers gives none
    return _compiled(name, sources, tokens)


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (a chat template is Jinja text)") from None
    except OSError as exc:
        raise UserError(f"cannot read the template {str(path)!r}: {exc.strerror or exc}") from None


def load_template(spec: str | os.PathLike[str]) -> ChatTemplate:
    """The chat template ``spec`` names (module docstring); a :class:`UserError` when it cannot be read."""
    text = os.fspath(spec)
    if text.lower() == SMOLLM2 and not Path(text).exists():
        from causaltrace.attribution.local_model import GGUF_NAME, gguf_path

        try:
            path = gguf_path()
        except UserError as exc:
            raise UserError(f"--check-template {SMOLLM2}: the SmolLM2 GGUF is not installed ({exc.message})") from None
        return _from_gguf(path, GGUF_NAME)
    path = Path(text)
    refuse_special_file(path, "the template")
    if not path.is_file():
        raise UserError(f"the template {text!r} is not a file (give a .jinja, a tokenizer_config.json, a .gguf or "
                        f"{SMOLLM2!r})")
    if path.suffix.lower() == ".gguf":
        return _from_gguf(path, path.name)
    if path.suffix.lower() == ".json":
        return _from_tokenizer_config(path)
    return _compiled(path.name, {"default": _read_text(path)}, {})


@dataclass(frozen=True)
class TemplateVerdict:
    """One pair the template does not keep apart: its two renderings are the same, or it cannot be rendered."""

    pair_id: str
    run_id: str
    step_index: int | None
    agent: str | None
    differs_in: str
    error: str | None = None

    def line(self, template: str) -> str:
        where = f"pair {self.pair_id} (run {self.run_id}, step #{self.step_index}, {self.agent})"
        if self.error is not None:
            return f"{where}: {template} cannot render it: {self.error}"
        return (f"{where}: chosen and rejected render the same under {template}; they differ only in "
                f"{self.differs_in}, which it does not render")


@dataclass(frozen=True)
class TemplateCheck:
    """The result of :func:`check_rows`: how many pairs were rendered, which collapsed, which failed."""

    template: str
    checked: int
    same: list[TemplateVerdict]
    failed: list[TemplateVerdict]

    def lines(self) -> list[str]:
        """One line per pair that collapsed or failed, then the summary."""
        out = [v.line(self.template) for v in [*self.same, *self.failed]]
        summary = (f"template check: {len(self.same)} of {self.checked} pair(s) render chosen and rejected the same "
                   f"under {self.template}")
        if self.failed:
            summary += f", {len(self.failed)} cannot be rendered"
        if self.same:
            summary += "; a template must render tool_calls and tool messages"
        return [*out, summary]


def _differs_in(chosen: list[dict[str, Any]], rejected: list[dict[str, Any]]) -> str:
    """What the two sides' turns differ in: ``content``, ``tool calls`` or both."""
    parts = []
    if [m.get("content") for m in chosen] != [m.get("content") for m in rejected]:
        parts.append("content")
    if [m.get("tool_calls") for m in chosen] != [m.get("tool_calls") for m in rejected]:
        parts.append("tool calls")
    return " and ".join(parts) or "nothing"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, _TemplateRaised):
        return f"it raised: {text}"
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def check_rows(rows: Iterable[dict[str, Any]], template: ChatTemplate) -> TemplateCheck:
    """Render each ``trl-dpo`` row (:func:`causaltrace.replay.pairs.pair_rows`) with ``template``, both sides."""
    checked, same, failed = 0, [], []
    for row in rows:
        checked += 1
        meta = row.get("metadata") or {}
        differs = _differs_in(row["chosen"], row["rejected"])
        ident = {"pair_id": str(meta.get("pair_id")), "run_id": str(meta.get("run_id")),
                 "step_index": meta.get("step_index"), "agent": meta.get("agent"), "differs_in": differs}
        try:
            chosen = template.render(row["prompt"] + row["chosen"], row.get("tools"))
            rejected = template.render(row["prompt"] + row["rejected"], row.get("tools"))
        except Exception as exc:  # a template is user code: whatever it raises is this pair's line
            failed.append(TemplateVerdict(**ident, error=_first_line(exc)))
            continue
        if chosen == rejected:
            same.append(TemplateVerdict(**ident))
    return TemplateCheck(template=template.name, checked=checked, same=same, failed=failed)
