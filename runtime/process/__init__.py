"""A process's life: shutdown signal and budget, owned tasks, logs, readiness.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.process.logs import bind_log_context, configure_logging
    from runtime.process.readiness import check_readiness
    from runtime.process.shutdown import Shutdown
    from runtime.process.shutdown_budget import ShutdownBudget
    from runtime.process.tasks import TaskSet

_WHERE = {
    "Shutdown": "shutdown",
    "ShutdownBudget": "shutdown_budget",
    "TaskSet": "tasks",
    "bind_log_context": "logs",
    "check_readiness": "readiness",
    "configure_logging": "logs",
}
__all__ = [
    "Shutdown",
    "ShutdownBudget",
    "TaskSet",
    "bind_log_context",
    "check_readiness",
    "configure_logging",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
