"""Example agents: harmless in-memory operations, some of which need a person's approval.

The default registry (`AGENTS=runtime.examples:AGENTS`). Each worker process keeps its own
pretend directory of users and services; nothing outside the process changes.

Tools get an idempotency key for free: `ctx.tool_call_id` is the model's call id, the same when
a worker dies and another one runs the approved call again.

`ops` also uses an MCP server, `db` (`runtime/examples/db_server.py`, started by the worker over
stdio): `list_tables` runs freely, `drop_table` needs approval (the server's `require_approval`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agents import Agent, RunContextWrapper, function_tool
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext

USERS: dict[str, dict[str, str]] = {
    "u-100": {"name": "Ada Lovelace", "email": "ada@example.com", "status": "active"},
    "u-101": {"name": "Grace Hopper", "email": "grace@example.com", "status": "active"},
    "u-102": {"name": "Alan Turing", "email": "alan@example.com", "status": "suspended"},
}
SERVICES: dict[str, int] = {"api": 0, "billing": 0, "search": 0}
"""Service name -> how many times it was restarted."""
REFUNDS: dict[str, str] = {}
"""Idempotency key -> refund id: a refund re-run after a crash is not paid twice."""


@function_tool
def list_users() -> list[dict[str, str]]:
    """List every user account with its id, name, email and status."""
    return [{"id": user_id, **user} for user_id, user in USERS.items()]


@function_tool(needs_approval=True)
def delete_user(user_id: str) -> str:
    """Delete a user account permanently.

    Args:
        user_id: The id of the user to delete, e.g. u-100.
    """
    user = USERS.pop(user_id, None)
    if user is None:
        return f"No user {user_id}; nothing was deleted."
    return f"Deleted user {user_id} ({user['name']})."


@function_tool(needs_approval=True)
def restart_service(service: str) -> str:
    """Restart a running service. Users see errors for a few seconds.

    Args:
        service: One of the service names: api, billing, search.
    """
    if service not in SERVICES:
        return f"No service {service!r}; known services: {', '.join(SERVICES)}."
    SERVICES[service] += 1
    return f"Restarted {service} (restart #{SERVICES[service]})."


@function_tool(needs_approval=True)
def refund_order(ctx: ToolContext[Any], order_id: str, amount_cents: int) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund, e.g. o-5521.
        amount_cents: How much to refund, in cents.
    """
    refund = REFUNDS.setdefault(ctx.tool_call_id, f"rf-{len(REFUNDS) + 1:04d}")
    return f"Refunded {amount_cents / 100:.2f} on order {order_id} (refund {refund})."


db = MCPServerStdio(
    params={"command": sys.executable, "args": [str(Path(__file__).with_name("db_server.py"))]},
    name="db",
    require_approval={"always": {"tool_names": ["drop_table"]}},
    cache_tools_list=True,
)


def _ops_instructions(ctx: RunContextWrapper[Any], agent: Agent[Any]) -> str:
    requester = ctx.context.get("requester", "someone") if isinstance(ctx.context, dict) else ""
    return (
        "You are an operations assistant for a small company, working for a person in a "
        f"Slack channel (their id is {requester}). Use the tools to do what they ask. Some tools "
        "need a person's approval; if a call is rejected, read the reason, do not retry the same "
        "call, and explain what happened. Answer briefly."
    )


billing = Agent[Any](
    name="billing",
    handoff_description="Handles refunds and other billing questions.",
    instructions="You handle refunds. Use refund_order; amounts are in cents. Answer briefly.",
    tools=[refund_order],
)

ops = Agent[Any](
    name="ops",
    handoff_description="Manages user accounts and services.",
    instructions=_ops_instructions,
    tools=[list_users, delete_user, restart_service],
    mcp_servers=[db],
    handoffs=[billing],
)
