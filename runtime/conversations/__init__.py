"""A thread's history, kept by Countersign in Redis for each reply in the thread."""

from runtime.conversations.threads import ThreadHistory

__all__ = [
    "ThreadHistory",
]
