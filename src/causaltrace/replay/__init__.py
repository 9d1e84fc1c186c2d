"""Replay: re-run a recorded team with a corrected step (CausalFlow), repair it, collect repair pairs.

``causaltrace.replay`` is both this package and the verb of the public API (ARCHITECTURE "Shared contracts"):
calling the package — ``await causaltrace.replay(run, factory, intervention, verify)`` — calls
:func:`causaltrace.replay.executor.replay`. (A plain function bound to the same name would hide the package, so that
``import causaltrace.replay.sandbox as sandbox`` stopped working.)
"""

from __future__ import annotations

import sys
import types
from typing import Any


class _CallableReplayPackage(types.ModuleType):
    """This package, callable as :func:`causaltrace.replay.executor.replay`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from causaltrace.replay.executor import replay

        return replay(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableReplayPackage
