"""The patch registry of the AutoGen wing and its on/off switch.

:func:`patch_attribute` wraps one class attribute with a wrapt ``FunctionWrapper`` (once) and remembers the original,
:func:`unpatch_all` restores every original. :func:`patch_defining` patches the class of an MRO that defines an
attribute, so user subclasses defined after ``instrument_autogen`` are covered on first use. :data:`SWITCH` lets the
wrappers act (``instrument_autogen``) or pass every call straight through (``uninstrument_autogen``, and the
overhead benchmark's "patches only" mode). No AutoGen import here: the hook modules register their wrappers.
"""

from __future__ import annotations

import threading
from typing import Any

import wrapt

__all__ = ["CHECKED", "SWITCH", "disable", "enable", "patch_attribute", "patch_defining", "patched", "unpatch_all"]


class Switch:
    """Whether the wrappers act (``on``) or pass every call straight through; read on every wrapped call."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


SWITCH = Switch()


def enable() -> None:
    """Let the wrappers act (set by ``instrument_autogen``)."""
    SWITCH.on = True


def disable() -> None:
    """Make every wrapper a pass-through (set by ``uninstrument_autogen``)."""
    SWITCH.on = False


_PATCH_LOCK = threading.RLock()
#: (owner class, attribute) → the original raw class attribute (function, staticmethod, classmethod).
_ORIGINALS: dict[tuple[type, str], Any] = {}
_CHECKED: set[tuple[type, str]] = set()
#: The (class, attribute) pairs :func:`patch_defining` has handled (cleared by :func:`unpatch_all`): a hook that
#: runs on every framework event tests it before calling in.
CHECKED = _CHECKED


def patch_attribute(owner: type, attribute: str, wrapper: Any) -> bool:
    """Wrap ``owner.<attribute>`` (as defined in ``owner.__dict__``) with a wrapt ``FunctionWrapper``; once."""
    with _PATCH_LOCK:
        if (owner, attribute) in _ORIGINALS or attribute not in owner.__dict__:
            return False
        original = owner.__dict__[attribute]
        _ORIGINALS[(owner, attribute)] = original
        setattr(owner, attribute, wrapt.FunctionWrapper(original, wrapper))
        return True


def unpatch_all() -> int:
    """Restore every original patched by :func:`patch_attribute`; returns how many were restored."""
    with _PATCH_LOCK:
        restored = 0
        for (owner, attribute), original in reversed(list(_ORIGINALS.items())):
            setattr(owner, attribute, original)
            restored += 1
        _ORIGINALS.clear()
        _CHECKED.clear()
        return restored


def patched() -> dict[tuple[type, str], Any]:
    """A copy of the patch registry (tests)."""
    with _PATCH_LOCK:
        return dict(_ORIGINALS)


def patch_defining(cls: type, attribute: str, wrapper: Any, *, skip: tuple[type, ...] = ()) -> None:
    """Patch ``attribute`` on the class of ``cls``'s MRO that defines it (a user subclass defined after
    ``instrument_autogen`` included)."""
    if (cls, attribute) in _CHECKED:
        return
    with _PATCH_LOCK:
        for klass in cls.__mro__:
            if attribute in klass.__dict__:
                if klass not in skip:
                    patch_attribute(klass, attribute, wrapper)
                break
        _CHECKED.add((cls, attribute))
