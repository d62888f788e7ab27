"""Tools from MCP servers: connections, listings and where a pending call comes from."""
