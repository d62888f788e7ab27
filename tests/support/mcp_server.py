"""The MCP server of the tests (`db`, over stdio), started by the worker as the SDK does.

With `COUNTERSIGN_TEST_LEDGER` (a Redis URL and key) it records its process id under
`<key>:mcp:pids` when it starts, and each `drop_table` it runs in the ledger itself, so a test
can count executions and kill the server. While `<key>:mcp:down` exists it refuses to start
(exits at once), as a server that stays down would.
"""

from __future__ import annotations

import json
import os
import sys

import redis
from mcp.server.mcpserver import MCPServer

server = MCPServer("db")


def _ledger() -> tuple[redis.Redis, str] | None:
    ledger = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if not ledger:
        return None
    url, key = ledger.split(" ")
    return redis.Redis.from_url(url), key


@server.tool()
def list_tables() -> str:
    """List the tables of the test database."""
    return "users, orders"


@server.tool()
def drop_table(table: str) -> str:
    """Drop a table and every row in it. This cannot be undone."""
    found = _ledger()
    if found is not None:
        client, key = found
        client.rpush(key, json.dumps({"tool": "drop_table", "arguments": {"table": table}}))
        client.expire(key, 600)
    return f"dropped {table}"


def main() -> None:
    found = _ledger()
    if found is not None:
        client, key = found
        if client.exists(f"{key}:mcp:down"):
            sys.exit(1)
        client.rpush(f"{key}:mcp:pids", os.getpid())
        client.expire(f"{key}:mcp:pids", 600)
    server.run("stdio")


if __name__ == "__main__":
    main()
