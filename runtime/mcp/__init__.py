"""Tools from MCP servers: connections, listings and where a pending call comes from.

Floor 6 (a run): imports `runtime.registry` beside it, and the floors below.
"""

from runtime.mcp.listing import McpListings

__all__ = [
    "McpListings",
]
