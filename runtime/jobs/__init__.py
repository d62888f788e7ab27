"""The job queue between web and workers: contracts, consumer, router, due sets, live workers."""

from runtime.jobs.contracts import (
    APPROVAL_ID_PATTERN,
    RUN_ID_PATTERN,
    Conversation,
    StartJob,
    new_run_id,
)
from runtime.jobs.queue import JobQueue

__all__ = [
    "APPROVAL_ID_PATTERN",
    "RUN_ID_PATTERN",
    "Conversation",
    "JobQueue",
    "StartJob",
    "new_run_id",
]
