"""What a pending call is and shows: its description, digest, context and effect preview.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.calls.digest import call_digest, shown_digest

_WHERE = {
    "call_digest": "digest",
    "shown_digest": "digest",
}
__all__ = ["call_digest", "shown_digest"]

__getattr__ = lazy_names(__name__, _WHERE)
