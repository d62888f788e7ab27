"""The run record: one Redis hash per run, the scripts that touch it, the store.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.record.envelope import CardCopy, Decision, PendingCall, UnjudgedRule
    from runtime.record.gauges import StateGauges, StateSnapshot, read_state
    from runtime.record.layout import HOME_TAB, CallGate
    from runtime.record.reads import Requester, parse_copies, parse_gate
    from runtime.record.view import read

_WHERE = {
    "CallGate": "layout",
    "CardCopy": "envelope",
    "Decision": "envelope",
    "HOME_TAB": "layout",
    "PendingCall": "envelope",
    "Requester": "reads",
    "StateGauges": "gauges",
    "StateSnapshot": "gauges",
    "UnjudgedRule": "envelope",
    "parse_copies": "reads",
    "parse_gate": "reads",
    "read": "view",
    "read_state": "gauges",
}
__all__ = [
    "HOME_TAB",
    "CallGate",
    "CardCopy",
    "Decision",
    "PendingCall",
    "Requester",
    "StateGauges",
    "StateSnapshot",
    "UnjudgedRule",
    "parse_copies",
    "parse_gate",
    "read",
    "read_state",
]

__getattr__ = lazy_names(__name__, _WHERE)
