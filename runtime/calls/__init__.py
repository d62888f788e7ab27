"""What a pending call shows: its description, the digest that binds an approval to it, and
its effect preview (on threads of its own).

Floor 1 (values): imports nothing else of `runtime`.
"""

from runtime.calls.digest import call_digest, shown_digest

__all__ = [
    "call_digest",
    "shown_digest",
]
