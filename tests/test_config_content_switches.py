"""TraceConfig's content switches (``oi_content``, ``genai_content_on``): read on every step and model call, so
each instance keeps its answer after the first read (issue 35) — which must follow the instance's own fields,
survive ``dataclasses.replace`` and pickling as a fresh answer, and never enter equality or the repr."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from causaltrace.config import TraceConfig


@pytest.mark.parametrize(
    ("capture", "genai", "oi_on", "genai_on"),
    [(None, False, True, False), (None, True, True, True), (False, True, False, False), (True, False, True, True)],
)
def test_the_switches_follow_capture_content_and_genai_content(capture, genai, oi_on, genai_on):
    config = TraceConfig(capture_content=capture, genai_content=genai)
    assert (config.oi_content, config.genai_content_on) == (oi_on, genai_on)
    assert (config.oi_content, config.genai_content_on) == (oi_on, genai_on)  # the kept answer, read again


def test_a_replaced_or_unpickled_config_answers_for_its_own_fields():
    off = TraceConfig(capture_content=False)
    assert (off.oi_content, off.genai_content_on) == (False, False)
    on = dataclasses.replace(off, capture_content=None, genai_content=True)
    assert (on.oi_content, on.genai_content_on) == (True, True)
    assert (off.oi_content, off.genai_content_on) == (False, False)
    again = pickle.loads(pickle.dumps(on))
    assert (again.oi_content, again.genai_content_on) == (True, True)
    read, unread = TraceConfig(genai_content=True), TraceConfig(genai_content=True)
    assert read.genai_content_on
    assert read == unread and repr(read) == repr(unread)
