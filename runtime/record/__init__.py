"""The run record: one Redis hash per run, the scripts that touch it, the store."""

from runtime.record.call_rule import CallRule, Unjudged
from runtime.record.choices import GRANT_ID_PATTERN, GrantScope
from runtime.record.envelope import CardCopy, Decision, PendingCall, UnjudgedRule
from runtime.record.gauges import StateGauges, StateSnapshot, read_state
from runtime.record.layout import HOME_TAB, CallGate
from runtime.record.permissions import AlwaysPermission, RuleKey
from runtime.record.reads import Requester, parse_copies, parse_gate
from runtime.record.view import read

__all__ = [
    "GRANT_ID_PATTERN",
    "HOME_TAB",
    "AlwaysPermission",
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
