"""Calls waiting for people: copies, reminders, escalation, expiry, what waits.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.waiting.open_approvals import OpenApproval, OpenApprovals

_WHERE = {
    "OpenApproval": "open_approvals",
    "OpenApprovals": "open_approvals",
}
__all__ = ["OpenApproval", "OpenApprovals"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
