"""A process's life: shutdown signal and budget, owned tasks, logs, readiness, retry back-off.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.process.backoff import Backoff
    from runtime.process.credentials import Credentials
    from runtime.process.logs import bind_log_context, configure_logging
    from runtime.process.readiness import check_readiness, with_credentials
    from runtime.process.shutdown import Shutdown
    from runtime.process.shutdown_budget import ShutdownBudget
    from runtime.process.tasks import TaskSet

_WHERE = {
    "Backoff": "backoff",
    "Credentials": "credentials",
    "Shutdown": "shutdown",
    "ShutdownBudget": "shutdown_budget",
    "TaskSet": "tasks",
    "bind_log_context": "logs",
    "check_readiness": "readiness",
    "configure_logging": "logs",
    "with_credentials": "readiness",
}
__all__ = [
    "Backoff",
    "Credentials",
    "Shutdown",
    "ShutdownBudget",
    "TaskSet",
    "bind_log_context",
    "check_readiness",
    "configure_logging",
    "with_credentials",
]

__getattr__ = lazy_names(__name__, _WHERE)
