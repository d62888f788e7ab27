"""The run record: one Redis hash per run, every field of it, the scripts that touch it, the store.

Its fields' values live here too: the versioned envelope, the rule resolved for a call and the
gate that stores it, a decision's choices, Approve always permissions, a call's reach, start
marks, journaled model turns, stop marks, leases, and the gauges read from it.

Floor 3 (the record): imports the storage and values floors.
"""

from runtime.record.call_rule import CallRule, Unjudged
from runtime.record.choices import GRANT_ID_PATTERN, GrantScope
from runtime.record.envelope import Approval, CardCopy, Decision, PendingCall, UnjudgedRule
from runtime.record.gauges import StateGauges, StateSnapshot, read_state
from runtime.record.layout import HOME_TAB, CallGate
from runtime.record.permissions import AlwaysPermission, RuleKey
from runtime.record.reads import Requester, parse_copies, parse_gate
from runtime.record.view import read

__all__ = [
    "GRANT_ID_PATTERN",
    "HOME_TAB",
    "AlwaysPermission",
    "Approval",
    "CallGate",
    "CallRule",
    "CardCopy",
    "Decision",
    "GrantScope",
    "PendingCall",
    "Requester",
    "RuleKey",
    "StateGauges",
    "StateSnapshot",
    "Unjudged",
    "UnjudgedRule",
    "parse_copies",
    "parse_gate",
    "read",
    "read_state",
]
