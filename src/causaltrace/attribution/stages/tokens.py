"""The salient tokens of a text: what the deterministic stages compare steps by (relevance, loops, the anchor).

Words of 3+ characters, lower-cased, minus stop-words (English function words and the chatter of agent logs:
"step", "next", "terminate"…), and numbers with their thousands separators dropped. A stage-level module of its
own because the failure anchor, loop detection and backward relevance all use it, and relevance uses the anchor.
"""

from __future__ import annotations

import re

__all__ = ["salient_tokens"]

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}|\d+(?:[.,]\d+)*")
_STOP = frozenset(
    """the and for are but not you all any can had her was one our out has have him his how its let may new now old
    see two who did get use man way she too own say yes this that with from they them then than there their what
    when where which while will would could should shall into onto upon also just only very more most some such
    been being were your yours about above after again against because before below between both down during each
    few further here hers herself himself itself myself other over same through under until off once why whom these
    those does doing having ours ourselves themselves yourself yourselves please thank thanks okay sure let's
    step steps next first last need needs make made like well still even back much many via per terminate""".split()
)


def salient_tokens(text: str, limit: int = 200_000) -> set[str]:
    """Lower-cased words of 3+ characters minus stop-words, and numbers (thousands separators dropped)."""
    out: set[str] = set()
    for m in _WORD.finditer(text[:limit]):
        tok = m.group(0)
        if tok[0].isdigit():
            out.add(tok.replace(",", ""))
        else:
            low = tok.lower()
            if low not in _STOP:
                out.add(low)
    return out
