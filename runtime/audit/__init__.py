"""The audit trail: a Redis stream of everything that happened, and its event names."""

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditEntry, AuditTrail

__all__ = [
    "AuditEntry",
    "AuditEvent",
    "AuditTrail",
]
