"""Example agents: harmless in-memory operations, some of which need a person's approval.

The default registry (`AGENTS=runtime.examples:AGENTS`). Each worker process keeps its own
pretend directory of users and services; nothing outside the process changes.

`delete_user`, `restart_service` and `refund_order` declare previews (`runtime.calls.previews`): the
card says whose account would go, which instances would restart, or how much of an order goes
back, before anyone decides.

Tools get an idempotency key for free: `ctx.tool_call_id` is the model's call id, the same when
a worker dies and another one runs the approved call again.

`ops` also uses an MCP server, `db` (`runtime/examples/db_server.py`, started by the worker over
stdio): `list_tables` runs freely, `drop_table` needs approval (the server's `require_approval`).

`ops` may also answer in Spanish through an agent used as a tool, whose own tool needs approval
too (`runtime/examples/languages.py`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

from agents import Agent, RunContextWrapper, function_tool
from agents.mcp import MCPServerStdio
from agents.tool_context import ToolContext
from pydantic import Field

from runtime.examples.languages import respond_spanish
from runtime.tools import preview

USERS: dict[str, dict[str, str]] = {
    "u-100": {"name": "Ada Lovelace", "email": "ada@example.com", "status": "active"},
    "u-101": {"name": "Grace Hopper", "email": "grace@example.com", "status": "active"},
    "u-102": {"name": "Alan Turing", "email": "alan@example.com", "status": "suspended"},
}
SERVICES: dict[str, int] = {"api": 0, "billing": 0, "search": 0}
"""Service name -> how many times it was restarted."""
INSTANCES: dict[str, tuple[str, ...]] = {
    "api": ("api-1", "api-2", "api-3"),
    "billing": ("billing-1",),
    "search": ("search-1", "search-2"),
}
ORDERS: dict[str, dict[str, str | int]] = {
    "o-5521": {"customer": "Grace Hopper", "total_cents": 4800, "card": "Visa ending 4242"},
    "o-5522": {"customer": "Ada Lovelace", "total_cents": 1999, "card": "Mastercard ending 4444"},
    "o-7788": {"customer": "Alan Turing", "total_cents": 250000, "card": "Amex ending 1005"},
}
REFUNDS: dict[str, str] = {}
"""Idempotency key -> refund id: a refund re-run after a crash is not paid twice."""
REFUNDED: dict[str, int] = {}
"""Order id -> cents refunded so far."""


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


@preview(delete_user)
def preview_delete_user(user_id: str) -> str:
    """What the card shows before anyone decides: whose account would go, and what with it."""
    user = USERS.get(user_id)
    if user is None:
        return f"There is no user {user_id}: nothing would be deleted."
    return (
        f"Would permanently delete {user['name']} ({user_id}, {user['status']}): "
        f"the account, its email address {user['email']} and its sign-in."
    )


@preview(restart_service)
def preview_restart_service(service: str) -> str:
    instances = INSTANCES.get(service)
    if instances is None:
        return f"There is no service {service!r}: nothing would restart."
    count = f"{len(instances)} instance" + ("" if len(instances) == 1 else "s")
    return f"Would restart {count} of {service}: {', '.join(instances)}, one at a time."


def _refund_refused(order_id: str, amount_cents: int) -> str | None:
    """Why the payment provider refuses this refund, or None: the tool and its preview ask
    the same question, so that what the card foresees is what then happens."""
    order = ORDERS.get(order_id)
    if order is None:
        return f"there is no order {order_id}"
    paid = int(order["total_cents"]) - REFUNDED.get(order_id, 0)
    if amount_cents > paid:
        return (
            f"{amount_cents / 100:.2f} is more than the {paid / 100:.2f} paid on order {order_id}"
        )
    return None


@function_tool(needs_approval=True)
def refund_order(
    ctx: ToolContext[Any], order_id: str, amount_cents: Annotated[int, Field(ge=1)]
) -> str:
    """Refund an order to the customer's card.

    Args:
        order_id: The order to refund, e.g. o-5521.
        amount_cents: How much to refund, in cents.
    """
    refund = REFUNDS.get(ctx.tool_call_id)
    if refund is None:
        refused = _refund_refused(order_id, amount_cents)
        if refused is not None:
            return f"Not refunded: {refused}, so the payment provider refused it."
        refund = REFUNDS.setdefault(ctx.tool_call_id, f"rf-{len(REFUNDS) + 1:04d}")
        REFUNDED[order_id] = REFUNDED.get(order_id, 0) + amount_cents
    return f"Refunded {amount_cents / 100:.2f} on order {order_id} (refund {refund})."


@preview(refund_order)
def preview_refund_order(order_id: str, amount_cents: int) -> str:
    refused = _refund_refused(order_id, amount_cents)
    if refused is not None:
        return f"Would not refund: {refused}, so the payment provider would refuse it."
    order = ORDERS[order_id]
    paid = int(order["total_cents"]) - REFUNDED.get(order_id, 0)
    return (
        f"Would refund {amount_cents / 100:.2f} of {paid / 100:.2f} to {order['customer']}'s "
        f"{order['card']}, leaving {(paid - amount_cents) / 100:.2f} paid."
    )


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
    tools=[list_users, delete_user, restart_service, respond_spanish],
    mcp_servers=[db],
    handoffs=[billing],
)
