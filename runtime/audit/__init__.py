"""The audit trail: a Redis stream of everything that happened, and its event names.

Floor 2 (storage): imports `db` beside it and the values floor.
"""

from runtime.audit.arguments import KeptArguments
from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditEntry, AuditTrail

__all__ = [
    "AuditEntry",
    "AuditEvent",
    "AuditTrail",
    "KeptArguments",
]
