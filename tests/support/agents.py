"""Agents for the tests: real SDK agents whose tools record that they ran.

In-process tests read `EXECUTIONS`; tests with real worker processes set
`COUNTERSIGN_TEST_LEDGER` (a Redis URL and key, space-separated) and read that list instead:
one entry per execution, written as the tool starts, naming the process (`DYNO`) it ran in.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import redis.asyncio as aioredis
from agents import (
    Agent,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
    function_tool,
    handoff,
)
from agents.tool_context import ToolContext

from runtime.db.cluster import connect_cluster
from runtime.tools import idempotency_key, safe_to_repeat

EXECUTIONS: list[tuple[str, dict[str, Any]]] = []


def _ledger_client(url: str) -> aioredis.Redis:
    """The ledger lives in the deployment's Redis: a cluster's with `REDIS_CLUSTER=true`."""
    if os.environ.get("REDIS_CLUSTER") == "true":
        return connect_cluster(url)
    return aioredis.Redis.from_url(url)


async def _record(ctx: ToolContext[Any], tool: str, arguments: dict[str, Any]) -> None:
    await _record_call(ctx.tool_call_id, tool, arguments)


async def _record_call(call_id: str, tool: str, arguments: dict[str, Any]) -> None:
    EXECUTIONS.append((tool, arguments))
    ledger = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if ledger:
        url, key = ledger.split(" ")
        entry = json.dumps(
            {
                "tool": tool,
                "arguments": arguments,
                "call_id": call_id,
                "dyno": os.environ.get("DYNO", ""),
                "at": time.time(),
            }
        )
        client = _ledger_client(url)
        try:
            await client.rpush(key, entry)
            await client.expire(key, 600)
        finally:
            await client.aclose()


@function_tool
async def list_users(ctx: ToolContext[Any]) -> list[str]:
    """List user ids."""
    await _record(ctx, "list_users", {})
    return ["u-100", "u-101"]


@function_tool(needs_approval=True)
async def delete_user(ctx: ToolContext[Any], user_id: str) -> str:
    """Delete a user."""
    await _record(ctx, "delete_user", {"user_id": user_id})
    return f"deleted {user_id}"


@function_tool(needs_approval=True)
async def refund_order(ctx: ToolContext[Any], order_id: str, amount_cents: int) -> str:
    """Refund an order (its rules, in the tests' policies, go by `amount_cents`)."""
    await _record(ctx, "refund_order", {"order_id": order_id, "amount_cents": amount_cents})
    return f"refunded {amount_cents} on {order_id}"


@function_tool(needs_approval=True)
async def restart_service(ctx: ToolContext[Any], service: str) -> str:
    """Restart a service."""
    await _record(ctx, "restart_service", {"service": service})
    return f"restarted {service}"


@function_tool(needs_approval=True)
async def explode(ctx: ToolContext[Any]) -> str:
    """A tool that always fails."""
    await _record(ctx, "explode", {})
    raise RuntimeError("boom: secret internal detail")


@function_tool(needs_approval=True, failure_error_function=None)
async def write_ledger(ctx: ToolContext[Any], entry: str) -> str:
    """A tool whose errors escape to the runner (no failure_error_function): always fails."""
    await _record(ctx, "write_ledger", {"entry": entry})
    raise ConnectionError("ledger database unreachable")


@function_tool(needs_approval=True)
async def migrate(ctx: ToolContext[Any], table: str) -> str:
    """A slow tool: the first attempt of each call takes SLOW_TOOL_SECONDS (default 30), and
    says which attempt it was and its idempotency key."""
    attempts = await _attempts(ctx.tool_call_id)
    await _record(ctx, "migrate", {"table": table})
    if attempts == 0:
        await asyncio.sleep(float(os.environ.get("SLOW_TOOL_SECONDS", "30")))
    return f"migrated {table} (attempt {attempts + 1}, key {idempotency_key(ctx)})"


@safe_to_repeat
@function_tool(needs_approval=True)
async def warm_cache(ctx: ToolContext[Any], region: str) -> str:
    """Like `migrate` (slow on its first attempt), but declared safe to repeat: a call cut off
    inside it runs again without asking."""
    attempts = await _attempts(ctx.tool_call_id)
    await _record(ctx, "warm_cache", {"region": region})
    if attempts == 0:
        await asyncio.sleep(float(os.environ.get("SLOW_TOOL_SECONDS", "30")))
    return f"warmed {region} (attempt {attempts + 1})"


@function_tool(needs_approval=True)
async def drain_node(ctx: ToolContext[Any], node: str, seconds: float) -> str:
    """Drain a node. Takes `seconds`, so that a test's kill can land while it runs."""
    await _record(ctx, "drain_node", {"node": node, "seconds": seconds})
    await asyncio.sleep(seconds)
    return f"drained {node}"


async def _attempts(call_id: str) -> int:
    """How often this call id already started, across worker processes (via the ledger)."""
    ledger = os.environ.get("COUNTERSIGN_TEST_LEDGER")
    if not ledger:
        return sum(1 for tool, _ in EXECUTIONS if tool == "migrate")
    url, key = ledger.split(" ")
    client = _ledger_client(url)
    try:
        entries: Any = await client.lrange(key, 0, -1)
    finally:
        await client.aclose()
    return sum(1 for entry in entries if json.loads(entry)["call_id"] == call_id)


helper = Agent[Any](name="helper", instructions="You restart services.", tools=[restart_service])

ops = Agent[Any](
    name="ops",
    instructions="You manage users.",
    tools=[list_users, delete_user, restart_service, explode, write_ledger, migrate, refund_order],
    handoffs=[helper],
)

REGISTRY = [ops, helper]


# The same agents after a deploy that removed `delete_user` (for the deploy tests).
REGISTRY_AFTER_DEPLOY = [
    ops.clone(tools=[t for t in ops.tools if getattr(t, "name", "") != "delete_user"]),
    helper,
]


# `ops` with a tool safe to repeat besides (tests/runtime/journal/test_lost_outcomes.py); the same
# names.
REPEATABLE_REGISTRY = [ops.clone(tools=[*ops.tools, warm_cache]), helper]


@function_tool(needs_approval=True)
async def rotate_key(ctx: ToolContext[Any], key: str, seconds: float) -> str:
    """Rotate a key. Takes `seconds`, like `drain_node`."""
    await _record(ctx, "rotate_key", {"key": key, "seconds": seconds})
    await asyncio.sleep(seconds)
    return f"rotated {key}"


@function_tool(needs_approval=True)
async def cordon_node(ctx: ToolContext[Any], node: str, seconds: float) -> str:
    """Cordon a node. Takes `seconds`, like `drain_node`."""
    await _record(ctx, "cordon_node", {"node": node, "seconds": seconds})
    await asyncio.sleep(seconds)
    return f"cordoned {node}"


async def run_commands(request: ShellCommandRequest) -> ShellResult:
    """The chaos test's shell: each execution goes to the ledger; each command "prints" itself."""
    commands = list(request.data.action.commands)
    await _record_call(request.data.call_id, "shell", {"commands": commands})
    await asyncio.sleep(0.5)  # long enough for a kill to land inside
    return each_ran(commands)


def each_ran(commands: list[str]) -> ShellResult:
    """A shell's result in which every command exits 0 and "prints" itself (`ran ...`)."""
    return ShellResult(
        output=[
            ShellCommandOutput(
                stdout=f"ran {command}",
                command=command,
                outcome=ShellCallOutcome(type="exit", exit_code=0),
            )
            for command in commands
        ]
    )


keys = Agent[Any](name="keys", instructions="You rotate keys.", tools=[rotate_key])
"""Reached only as `ops`' agent tool `roll_keys`, which needs approval too."""

mechanic = Agent[Any](name="mechanic", instructions="You cordon nodes.", tools=[cordon_node])
"""Reached only through a `handoff(mechanic)` object of `ops`."""

# `ops` with, besides, a slow tool, a shell, an agent tool whose agent asks too, and a handoff
# object to an agent the registry does not list: the chaos test (tests/faults/test_chaos.py) calls
# every kind. The same names.
CHAOS_REGISTRY = [
    ops.clone(
        tools=[
            *ops.tools,
            drain_node,
            ShellTool(executor=run_commands, needs_approval=True),
            keys.as_tool(
                tool_name="roll_keys", tool_description="Roll keys over", needs_approval=True
            ),
        ],
        handoffs=[*ops.handoffs, handoff(mechanic)],
    ),
    helper,
]
