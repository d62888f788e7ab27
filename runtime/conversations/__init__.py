"""A thread's history, kept by Countersign in Redis for each reply in the thread.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.conversations.threads import ThreadHistory

_WHERE = {
    "ThreadHistory": "threads",
}
__all__ = ["ThreadHistory"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
