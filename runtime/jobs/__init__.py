"""The job queue between web and workers: contracts, consumer, router, due sets, live workers.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
