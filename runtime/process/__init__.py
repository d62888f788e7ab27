"""A process's life: shutdown signal and budget, owned tasks, logs, readiness, retry back-off.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.process.backoff import Backoff
    from runtime.process.logs import bind_log_context, configure_logging
    from runtime.process.readiness import check_readiness
    from runtime.process.shutdown import Shutdown
    from runtime.process.shutdown_budget import ShutdownBudget
    from runtime.process.tasks import TaskSet

_WHERE = {
    "Backoff": "backoff",
    "Shutdown": "shutdown",
    "ShutdownBudget": "shutdown_budget",
    "TaskSet": "tasks",
    "bind_log_context": "logs",
    "check_readiness": "readiness",
    "configure_logging": "logs",
}
__all__ = [
    "Backoff",
    "Shutdown",
    "ShutdownBudget",
    "TaskSet",
    "bind_log_context",
    "check_readiness",
    "configure_logging",
]

__getattr__ = lazy_names(__name__, _WHERE)
