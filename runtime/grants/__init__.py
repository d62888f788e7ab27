"""Grants: an approval that lets later calls like it run without a card, for a while.

Floor 5 (a call's actions): imports the rules, the record and the floors below.
"""

from runtime.grants.check import MembershipUnavailable
from runtime.grants.store import GRANT_CHOICES, Grant, GrantStore

__all__ = [
    "GRANT_CHOICES",
    "Grant",
    "GrantStore",
    "MembershipUnavailable",
]
