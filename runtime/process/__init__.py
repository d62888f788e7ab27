"""A process's life: shutdown signal and budget, owned tasks, logs, credentials, retry back-off.

Floor 1 (values): imports nothing else of `runtime`.
"""

from runtime.process.backoff import Backoff
from runtime.process.credentials import Credentials
from runtime.process.logs import bind_log_context, configure_logging
from runtime.process.shutdown import Shutdown
from runtime.process.shutdown_budget import ShutdownBudget
from runtime.process.tasks import TaskSet

__all__ = [
    "Backoff",
    "Credentials",
    "Shutdown",
    "ShutdownBudget",
    "TaskSet",
    "bind_log_context",
    "configure_logging",
]
