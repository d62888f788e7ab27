"""A thread's history, kept by Countersign in Redis for each reply in the thread.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.conversations.threads import ThreadHistory

_WHERE = {
    "ThreadHistory": "threads",
}
__all__ = ["ThreadHistory"]

__getattr__ = lazy_names(__name__, _WHERE)
