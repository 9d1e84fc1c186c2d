"""Links from imported steps back to the spans they came from (issue 34 item 3: ``--link``).

Usage::

    linker = Linker.parse("jaeger:http://localhost:16686")
    linker.link(step.source)       # "http://localhost:16686/trace/<trace id>?uiFind=<span id>", or None

A spec is one of:

* ``jaeger:URL`` — ``URL/trace/{trace_id}?uiFind={span_id}`` (Jaeger's UI opens the trace with the span found);
* ``phoenix:URL`` — ``URL/redirects/spans/{span_id}``: Phoenix's own redirect from an OpenTelemetry span id to the
  span in its project and trace, so no project id is needed;
* a template with ``{trace_id}``, ``{span_id}`` and ``{project_id}``; ``{project_id}`` is Phoenix's id of the
  project ``CAUSALTRACE_PROJECT`` names, looked up once at ``CAUSALTRACE_PHOENIX_URL``'s ``/v1/projects``
  (:class:`~causaltrace.config.BackendSettings`; ``PHOENIX_API_KEY`` sent as a bearer token when set).

A step without a source (not imported from spans) has no link. A bad spec, or a project that cannot be looked up,
is one :class:`~causaltrace.exceptions.UserError` line.
"""

from __future__ import annotations

import json
import string
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from causaltrace.config import BackendSettings
from causaltrace.exceptions import UserError
from causaltrace.schema import StepSource

__all__ = ["LINK_HELP", "Linker"]

LINK_HELP = ("link each imported step to its span: jaeger:URL, phoenix:URL, or a template with {trace_id}, "
             "{span_id} and {project_id}")
_FIELDS = {"trace_id", "span_id", "project_id"}


@dataclass
class Linker:
    """Turns a step's source into the URL of its span (module docstring)."""

    template: str
    settings: BackendSettings = field(default_factory=BackendSettings.from_env)
    _project_id: str | None = None

    @classmethod
    def parse(cls, spec: str, settings: BackendSettings | None = None) -> Linker:
        settings = settings if settings is not None else BackendSettings.from_env()
        kind, _, base = spec.partition(":")
        if kind in ("jaeger", "phoenix") and base.startswith(("http://", "https://")):
            base = base.rstrip("/")
            template = (f"{base}/trace/{{trace_id}}?uiFind={{span_id}}" if kind == "jaeger"
                        else f"{base}/redirects/spans/{{span_id}}")
            return cls(template, settings)
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(spec) if name is not None}
        except ValueError as exc:
            raise UserError(f"--link {spec!r}: not a template ({exc})") from exc
        if not names or not names <= _FIELDS:
            raise UserError(f"--link {spec!r}: expected jaeger:URL, phoenix:URL or a template using only "
                            "{trace_id}, {span_id}, {project_id}")
        return cls(spec, settings)

    def link(self, source: StepSource | None) -> str | None:
        """The URL of the span a step came from, or None for a step without a source."""
        if source is None or not source.span_id:
            return None
        values = {"trace_id": source.trace_id or "", "span_id": source.span_id}
        if "{project_id}" in self.template:
            values["project_id"] = self.project_id()
        return self.template.format(**values)

    def project_id(self) -> str:
        """Phoenix's id of the configured project, looked up once."""
        if self._project_id is None:
            self._project_id = _phoenix_project_id(self.settings)
        return self._project_id


def _phoenix_project_id(settings: BackendSettings) -> str:
    if not settings.phoenix_url or not settings.project:
        raise UserError("--link with {project_id} needs CAUSALTRACE_PHOENIX_URL and CAUSALTRACE_PROJECT")
    base = settings.phoenix_url.rstrip("/")
    headers = {"Accept": "application/json"}
    if settings.phoenix_api_key:
        headers["Authorization"] = f"Bearer {settings.phoenix_api_key}"
    cursor: str | None = None
    while True:
        query = urllib.parse.urlencode({"limit": "100", **({"cursor": cursor} if cursor else {})})
        try:
            with urllib.request.urlopen(urllib.request.Request(f"{base}/v1/projects?{query}", headers=headers),
                                        timeout=10) as answer:
                page: Any = json.loads(answer.read())
        except (urllib.error.URLError, OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot look up project {settings.project!r} in Phoenix at {base}: {exc}") from exc
        for project in page.get("data") or () if isinstance(page, dict) else ():
            if isinstance(project, dict) and project.get("name") == settings.project:
                return str(project.get("id"))
        cursor = page.get("next_cursor") if isinstance(page, dict) else None
        if not cursor:
            raise UserError(f"project {settings.project!r} not found in Phoenix at {base}")
