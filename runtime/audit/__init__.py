"""The audit trail: a Redis stream of everything that happened, and its event names.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.audit.events import AuditEvent
    from runtime.audit.trail import AuditEntry, AuditTrail

_WHERE = {
    "AuditEntry": "trail",
    "AuditEvent": "events",
    "AuditTrail": "trail",
}
__all__ = ["AuditEntry", "AuditEvent", "AuditTrail"]

__getattr__ = lazy_names(__name__, _WHERE)
