"""Tools from MCP servers: connections, listings and where a pending call comes from.

The names `bot` uses, loaded when first asked for: importing the package loads none of its
modules, so a module inside it may import a sibling package without a cycle.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runtime.mcp.listing import McpListings

_WHERE = {
    "McpListings": "listing",
}
__all__ = ["McpListings"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
