"""Where every call meets the policy: arguments as the tool gets them, bounded conditions.

Also what a rule that cannot be judged combines to, and Approve always as a permission of the
run.
"""

from runtime.judging.arguments import ArgumentSchema, JudgedArguments

__all__ = [
    "ArgumentSchema",
    "JudgedArguments",
]
