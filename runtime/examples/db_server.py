"""A small MCP server for the example agents: a pretend database, over stdio.

The worker starts it (`MCPServerStdio` in `runtime/examples/ops.py`) and keeps it for its life;
each worker has its own, with its own pretend tables. Written with the `mcp` package that the
Agents SDK depends on; run it by hand with `python runtime/examples/db_server.py` (it speaks
MCP on stdin and stdout).
"""

from __future__ import annotations

from typing import Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

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


class Archive(BaseModel):
    destination: Literal["cold storage", "backup bucket"] = "cold storage"
    keep_days: int = Field(30, ge=1, le=3650, description="How long the archive is kept")


@server.tool()
async def archive_table(table: str, ctx: Context) -> str:
    """Archive a table's rows; asks the person where to and for how long.

    Args:
        table: The table to archive, e.g. orders.
    """
    if table not in TABLES:
        return f"No table {table!r}; nothing was archived. Tables: {', '.join(TABLES) or 'none'}."
    answer = await ctx.elicit(f"Where should the archive of {table} go, and for how long?", Archive)
    if answer.action != "accept":
        return f"Not archived: the person answered {answer.action}."
    where, rows = answer.data, TABLES[table]
    return f"Archived {table} ({rows} rows) to {where.destination} for {where.keep_days} days."


if __name__ == "__main__":
    server.run("stdio")
