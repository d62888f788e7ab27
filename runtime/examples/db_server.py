"""A small MCP server for the example agents: a pretend database, over stdio.

The worker starts it (`MCPServerStdio` in `runtime/examples/ops.py`) and keeps it for its life;
each worker has its own, with its own pretend tables. Written with the `mcp` package that the
Agents SDK depends on; run it by hand with `python runtime/examples/db_server.py` (it speaks
MCP on stdin and stdout).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

TABLES: dict[str, int] = {"users": 3, "orders": 1250, "audit_log": 98000}
"""Table name -> rows."""

server = MCPServer("db")


@server.tool()
def list_tables() -> str:
    """List the database's tables with their row counts."""
    if not TABLES:
        return "The database has no tables."
    return "\n".join(f"{name}: {rows} rows" for name, rows in TABLES.items())


@server.tool()
def drop_table(table: str) -> str:
    """Drop a table and every row in it. This cannot be undone.

    Args:
        table: The table to drop, e.g. orders.
    """
    rows = TABLES.pop(table, None)
    if rows is None:
        return f"No table {table!r}; nothing was dropped. Tables: {', '.join(TABLES) or 'none'}."
    return f"Dropped table {table} ({rows} rows)."


if __name__ == "__main__":
    server.run("stdio")
