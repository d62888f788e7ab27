"""Where every call meets the policy: arguments as the tool gets them, bounded conditions.

Also what a rule that cannot be judged combines to, and Approve always as a permission of the
run.

The names others use, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.judging.arguments import ArgumentSchema, JudgedArguments
    from runtime.judging.call_rule import CallRule, Unjudged
    from runtime.judging.permissions import AlwaysPermission, RuleKey
    from runtime.judging.verdicts import Verdict, judge

_WHERE = {
    "AlwaysPermission": "permissions",
    "ArgumentSchema": "arguments",
    "CallRule": "call_rule",
    "JudgedArguments": "arguments",
    "RuleKey": "permissions",
    "Unjudged": "call_rule",
    "Verdict": "verdicts",
    "judge": "verdicts",
}
__all__ = [
    "AlwaysPermission",
    "ArgumentSchema",
    "CallRule",
    "JudgedArguments",
    "RuleKey",
    "Unjudged",
    "Verdict",
    "judge",
]

__getattr__ = lazy_names(__name__, _WHERE)
