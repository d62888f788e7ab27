"""People's decisions on calls, through the one decision script, with grants and edits; and the
decision nobody made (expiry).

Floor 5 (a call's actions): imports `grants` and `waiting` beside it, and the floors below.
"""

from runtime.decisions.batch import BatchRecorder, BatchResult, waiting_views
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

__all__ = [
    "BatchRecorder",
    "BatchResult",
    "CallView",
    "Choice",
    "DecisionRecorder",
    "EditChoice",
    "GrantChoice",
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
