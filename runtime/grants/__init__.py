"""Grants: an approval that lets later calls like it run without a card, for a while.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.grants.check import MembershipUnavailable
    from runtime.grants.store import GRANT_CHOICES, Grant, GrantStore

_WHERE = {
    "GRANT_CHOICES": "store",
    "Grant": "store",
    "GrantStore": "store",
    "MembershipUnavailable": "check",
}
__all__ = ["GRANT_CHOICES", "Grant", "GrantStore", "MembershipUnavailable"]

__getattr__ = lazy_names(__name__, _WHERE)
