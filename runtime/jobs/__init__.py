"""The job queue between web and workers: contracts, consumer, router, due sets, live workers.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.jobs.contracts import (
        APPROVAL_ID_PATTERN,
        RUN_ID_PATTERN,
        Conversation,
        StartJob,
        new_run_id,
    )
    from runtime.jobs.queue import JobQueue

_WHERE = {
    "APPROVAL_ID_PATTERN": "contracts",
    "Conversation": "contracts",
    "JobQueue": "queue",
    "RUN_ID_PATTERN": "contracts",
    "StartJob": "contracts",
    "new_run_id": "contracts",
}
__all__ = [
    "APPROVAL_ID_PATTERN",
    "RUN_ID_PATTERN",
    "Conversation",
    "JobQueue",
    "StartJob",
    "new_run_id",
]

__getattr__ = lazy_names(__name__, _WHERE)
