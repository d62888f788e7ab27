"""The job queue between web and workers: contracts, the stream, its consumer, due sets, live
workers. Which run a job goes to is the runs' business (`runtime.runs.router`).

Floor 2 (storage): imports `db` beside it and the values floor.
"""

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
