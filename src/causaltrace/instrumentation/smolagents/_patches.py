"""The patches the smolagents wing has installed (``wrapt``), and the one generic loop that undoes them.

Each wrapper belongs to one instrumentation generation: a wrapper whose generation is over passes straight
through, so a wrapper that another library wrapped over (and that could therefore not be removed) stays inert. The
generation is wrapt's ``enabled`` flag — a list, non-empty while its generation lives, tested by wrapt in C — so a
hooked call costs no Python frame of ours before the hook.
The facade (``__init__``) holds the table of what is patched when instrumenting; the model and tool classes of an
agent are patched when its first run starts (``_model_calls.patch_model_class``, ``_tools.patch_tool_classes``),
through :func:`ensure_patched`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["Wrapper", "ensure_patched", "install", "is_patched", "patch", "unpatch_all"]

logger = logging.getLogger("causaltrace")

#: A wrapt wrapper: ``(wrapped, instance, args, kwargs) -> result``.
Wrapper = Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


@dataclass
class _Patch:
    owner: Any  # a class or a module
    attr: str
    original: Any
    installed: Any


_LOCK = threading.RLock()
_PATCHES: list[_Patch] = []
#: (owner, attribute) → the wrappers installed there this generation (:func:`ensure_patched` looks them up per run
#: instead of scanning every patch).
_INSTALLED: dict[tuple[Any, str], list[Any]] = {}
#: The live generation's ``enabled`` flag for wrapt: ``[True]`` while it lives, emptied (false) when it is over.
_LIVE: list[list[bool]] = [[]]


def is_patched() -> bool:
    """Whether the wing's patches are installed."""
    return bool(_PATCHES)


def install(table: Callable[[], Iterable[tuple[Any, str, Wrapper]]]) -> None:
    """Install every ``(owner, attribute, wrapper)`` of ``table()`` as a new generation (a no-op when installed)."""
    with _LOCK:
        if _PATCHES:
            return
        _LIVE[0] = [True]
        for owner, attr, fn in table():
            patch(owner, attr, fn)


def unpatch_all() -> None:
    """Undo every patch (idempotent); a wrapper another library wrapped over stays, inert."""
    with _LOCK:
        _LIVE[0].clear()  # every wrapper still installed anywhere is inert from now on
        for p in reversed(_PATCHES):
            if vars(p.owner).get(p.attr) is p.installed:
                setattr(p.owner, p.attr, p.original)
            else:
                logger.info("causaltrace: %s.%s was wrapped again by another library; our wrapper stays, inert",
                            getattr(p.owner, "__name__", p.owner), p.attr)
        _PATCHES.clear()
        _INSTALLED.clear()


def patch(owner: Any, attr: str, fn: Wrapper) -> None:
    """Wrap ``owner.attr`` (defined on ``owner`` itself) with ``fn`` for the live generation."""
    import wrapt

    original = vars(owner).get(attr)
    if original is None:
        return
    # wrap_function_wrapper with wrapt's ``enabled``: the live generation's flag (a list wrapt tests in C)
    wrapt.wrap_object(owner, attr, wrapt.FunctionWrapper, (fn, _LIVE[0]))
    installed = vars(owner)[attr]
    _PATCHES.append(_Patch(owner, attr, original, installed))
    _INSTALLED.setdefault((owner, attr), []).append(installed)


def ensure_patched(cls: type, attr: str, fn: Wrapper) -> None:
    """Wrap ``attr`` on the class of ``cls``'s MRO that defines it (a subclass's override shadows a base patch)."""
    for owner in cls.__mro__:
        if attr in owner.__dict__:
            break
    else:
        return
    if owner is object:
        return
    with _LOCK:
        if not _PATCHES:
            return
        current = owner.__dict__[attr]
        for installed in _INSTALLED.get((owner, attr), ()):
            if installed is current:
                return
        patch(owner, attr, fn)
