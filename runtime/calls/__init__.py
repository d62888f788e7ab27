"""What a pending call is and shows: its description, digest, context and effect preview."""

from runtime.calls.digest import call_digest, shown_digest

__all__ = [
    "call_digest",
    "shown_digest",
]
