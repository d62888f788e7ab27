"""The audit trail: a Redis stream of everything that happened, and its event names.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.audit.events import AuditEvent
    from runtime.audit.trail import AuditEntry, AuditTrail

_WHERE = {
    "AuditEntry": "trail",
    "AuditEvent": "events",
    "AuditTrail": "trail",
}
__all__ = ["AuditEntry", "AuditEvent", "AuditTrail"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
