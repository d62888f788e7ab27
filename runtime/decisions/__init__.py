"""People's decisions on calls, through the one decision script, with grants and edits.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.decisions.batch import BatchRecorder, BatchResult, waiting_views
    from runtime.decisions.choices import GRANT_ID_PATTERN, GrantScope
    from runtime.decisions.edits import (
        InvalidEdit,
        argument_changes,
        parse_edit,
        pretty_arguments,
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
    "stricter_rule",
    "waiting_views",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
