"""A thread's history, kept by Countersign in Redis for each reply in the thread.

Floor 5 (a call's actions): imports the record and the floors below.
"""

from runtime.conversations.threads import ThreadHistory

__all__ = [
    "ThreadHistory",
]
