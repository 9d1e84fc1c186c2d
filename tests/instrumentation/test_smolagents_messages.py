"""smolagents' canonical messages: a message of one text part (smolagents' usual one) is read inline, with exactly
what the general part walk (``_contents``) gives — for the recording (key order kept) and the OpenInference form."""

from __future__ import annotations

import pytest

pytest.importorskip("smolagents")

from causaltrace.instrumentation.smolagents import _access as acc

CONTENTS = [
    [{"type": "text", "text": "hi ✓"}],
    [{"text": "keys the other way round", "type": "text"}],
    [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    [{"type": "text", "text": 5}],
    [{"type": "text", "text": "x", "extra": {"k": [1, 2]}}],
    [{"type": "image", "image": b"png"}],
    [{"type": "text"}],
    [],
    None,
    "plain",
]


@pytest.mark.parametrize("content", CONTENTS)
@pytest.mark.parametrize("oi", [True, False])
def test_a_message_reads_as_the_part_walk_reads_it(content, oi):
    plain: list | None = [] if oi else None
    [item] = acc.canonical_messages([{"role": "user", "content": content}], plain)
    if isinstance(content, str):
        kept, shown = content, content
    else:
        kept, shown = acc._contents(content, oi)
    assert item["content"] == kept
    if isinstance(kept, list):
        assert [list(part) for part in item["content"]] == [list(part) for part in kept]  # key order too
    if oi:
        assert plain == [{"role": "user", "content": shown}]
