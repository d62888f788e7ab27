"""Tools from MCP servers: connections, listings and where a pending call comes from."""

from runtime.mcp.listing import McpListings

__all__ = [
    "McpListings",
]
