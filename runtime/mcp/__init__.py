"""Tools from MCP servers: connections, listings and where a pending call comes from.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.mcp.listing import McpListings

_WHERE = {
    "McpListings": "listing",
}
__all__ = ["McpListings"]

__getattr__ = lazy_names(__name__, _WHERE)
