"""People's decisions on calls, through the one decision script, with grants and edits.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.decisions.batch import BatchRecorder, BatchResult, waiting_views
    from runtime.decisions.choices import GRANT_ID_PATTERN, GrantScope
    from runtime.decisions.edits import (
        InvalidEdit,
        argument_changes,
        parse_edit,
        pretty_arguments,
        schema_checks,
        stricter_rule,
    )
    from runtime.decisions.recorder import (
        CallView,
        Choice,
        DecisionRecorder,
        EditChoice,
        GrantChoice,
        RecordResult,
        Status,
        UnconfirmedDecision,
    )

_WHERE = {
    "BatchRecorder": "batch",
    "BatchResult": "batch",
    "CallView": "recorder",
    "Choice": "recorder",
    "DecisionRecorder": "recorder",
    "EditChoice": "recorder",
    "GRANT_ID_PATTERN": "choices",
    "GrantChoice": "recorder",
    "GrantScope": "choices",
    "InvalidEdit": "edits",
    "RecordResult": "recorder",
    "Status": "recorder",
    "UnconfirmedDecision": "recorder",
    "argument_changes": "edits",
    "parse_edit": "edits",
    "pretty_arguments": "edits",
    "schema_checks": "edits",
    "stricter_rule": "edits",
    "waiting_views": "batch",
}
__all__ = [
    "GRANT_ID_PATTERN",
    "BatchRecorder",
    "BatchResult",
    "CallView",
    "Choice",
    "DecisionRecorder",
    "EditChoice",
    "GrantChoice",
    "GrantScope",
    "InvalidEdit",
    "RecordResult",
    "Status",
    "UnconfirmedDecision",
    "argument_changes",
    "parse_edit",
    "pretty_arguments",
    "schema_checks",
    "stricter_rule",
    "waiting_views",
]

__getattr__ = lazy_names(__name__, _WHERE)
