"""Grants: an approval that lets later calls like it run without a card, for a while.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
