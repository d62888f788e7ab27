"""The MCP server of the tests that asks (`desk`, over stdio), written with the `mcp` package's
server API: its tools ask a person mid-call (`elicitation/create`) and return what they heard.

`refund` asks with a form (an amount, a reason, whether to notify, a speed to choose); `sign_in`
asks with a link. With `COUNTERSIGN_TEST_LEDGER` each tool records in the ledger that it started
and what it was answered, so a test counts runs where the tool runs.
"""

from __future__ import annotations

import json
import os
from typing import Literal

import redis
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel, Field

server = MCPServer("desk")


class Refund(BaseModel):
    amount: int = Field(description="In cents", ge=1)
    reason: str
    notify: bool = True
    speed: Literal["standard", "express"] = "standard"


def _record(entry: dict[str, object]) -> None:
    ledger = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if not ledger:
        return
    url, key = ledger.split(" ")
    client = redis.Redis.from_url(url)
    client.rpush(key, json.dumps(entry))
    client.expire(key, 600)


@server.tool()
async def refund(order: str, ctx: Context) -> str:
    """Refund an order; asks a person how much and why."""
    _record({"tool": "refund", "started": order})
    answer = await ctx.elicit(f"How much should order {order} get back, and why?", Refund)
    data = answer.data.model_dump() if answer.action == "accept" else None
    _record({"tool": "refund", "action": answer.action, "data": data})
    return f"{answer.action}: {json.dumps(data, sort_keys=True)}"


@server.tool()
async def sign_in(ctx: Context) -> str:
    """Sign in to the billing system; asks a person to open a link."""
    _record({"tool": "sign_in", "started": True})
    answer = await ctx.elicit_url(
        "Sign in to billing to let me read invoices", "https://billing.example.com/login", "login-1"
    )
    _record({"tool": "sign_in", "action": answer.action})
    return f"sign in: {answer.action}"


if __name__ == "__main__":
    server.run("stdio")
