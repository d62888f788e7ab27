"""The world the promise is checked in: its people, tools, policies and the model that asks.

The tools are real `function_tool`s of the Agents SDK; each writes what it received (after the
SDK validated the model's arguments with the tool's own schema: `"true"` arrives as `True`) to
`LEDGER` as it starts: the tool's own log, which the invariants read. The model is the fake
Responses endpoint of `tests/support/fake_openai.py`, answering from each run's plan: a list of
turns,
each a list of calls. Like a real model it gives every call a new id each time it answers, so
a turn asked again after a failure comes back with new ids (`ModelPlans.logical`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, function_tool
from agents.tool_context import ToolContext

from tests.support.fake_openai import Item, ModelError, ModelRequest, Reply, message, tool_call

MEMBERS = ("UALICE", "UBOB", "UCAROL")
GUEST = "UGUEST"
STRANGER = "UEVE"
"""A Slack Connect user of another organisation."""
PEOPLE = (*MEMBERS, GUEST, STRANGER)
WHO_THEY_ARE: dict[str, dict[str, Any]] = {
    GUEST: {"is_restricted": True},
    STRANGER: {"team_id": "T0THERORG", "is_stranger": True},
}
"""What `users.info` says of the people who are not full members (the fake Slack's `people`)."""
CHANNEL = "CGENERAL"
TTL_SECONDS = 300
ESCALATE_AFTER_SECONDS = 120


@dataclass(frozen=True)
class Execution:
    call_id: str
    tool: str
    agent: str
    arguments: dict[str, Any]
    """As the tool received them."""
    at: float
    """On the world's clock (`Clock`): Redis's, as the test moved it."""


@dataclass
class Clock:
    """How far the test moved Redis's clock ahead of this machine's (`tests.promise.rig`)."""

    offset: float = 0.0

    def now(self) -> float:
        return time.time() + self.offset


CLOCK = Clock()
LEDGER: list[Execution] = []
ToolHook = Callable[[str], Awaitable[None]]
TOOL_HOOKS: list[ToolHook] = []
"""Awaited by every tool as it starts (after its ledger entry): a fault may kill the worker
there, in the middle of the call."""


async def _ran(ctx: ToolContext[Any], tool: str, arguments: dict[str, Any]) -> None:
    agent = ctx.agent.name if ctx.agent is not None else "?"
    LEDGER.append(Execution(ctx.tool_call_id, tool, agent, arguments, CLOCK.now()))
    for hook in list(TOOL_HOOKS):
        await hook(ctx.tool_call_id)


@function_tool(needs_approval=True)
async def drop_table(ctx: ToolContext[Any], name: str, force: bool = False) -> str:
    """Drop a table."""
    await _ran(ctx, "drop_table", {"name": name, "force": force})
    return f"dropped {name}"


@function_tool(needs_approval=True)
async def refund_order(ctx: ToolContext[Any], order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    await _ran(ctx, "refund_order", {"order_id": order_id, "amount_cents": amount_cents})
    return f"refunded {amount_cents} on {order_id}"


@function_tool(needs_approval=True)
async def delete_user(ctx: ToolContext[Any], user_id: str) -> str:
    """Delete a user."""
    await _ran(ctx, "delete_user", {"user_id": user_id})
    return f"deleted {user_id}"


@function_tool(needs_approval=True)
async def restart_service(ctx: ToolContext[Any], service: str) -> str:
    """Restart a service."""
    await _ran(ctx, "restart_service", {"service": service})
    return f"restarted {service}"


@function_tool(needs_approval=True)
async def read_logs(ctx: ToolContext[Any], service: str) -> str:
    """Read a service's logs."""
    await _ran(ctx, "read_logs", {"service": service})
    return f"logs of {service}"


@function_tool
async def list_users(ctx: ToolContext[Any]) -> list[str]:
    """List user ids (no approval needed)."""
    await _ran(ctx, "list_users", {})
    return ["u-100", "u-101"]


AGENT = "ops"
ops = Agent[Any](
    name=AGENT,
    instructions="You run operations.",
    tools=[drop_table, refund_order, delete_user, restart_service, read_logs, list_users],
)
REGISTRY = [ops]
NEEDS_NO_APPROVAL = frozenset({"list_users"})

# What the model may ask, as it would send it: some values only the tool's schema coerces.
CALLS: dict[str, tuple[dict[str, Any], ...]] = {
    "drop_table": (
        {"name": "tmp_a", "force": False},
        {"name": "tmp_b", "force": False},
        {"name": "prod_users", "force": False},
        {"name": "tmp_c"},
        {"name": "tmp_a", "force": True},
        {"name": "tmp_a", "force": "true"},
        {"name": "tmp_b", "force": "True"},
    ),
    "refund_order": (
        {"order_id": "o-1", "amount_cents": 900},
        {"order_id": "o-2", "amount_cents": 150000},
        {"order_id": "o-3", "amount_cents": "150000"},
        {"order_id": "o-4", "amount_cents": "900"},
    ),
    "delete_user": ({"user_id": "u-100"}, {"user_id": "u-101"}),
    "restart_service": ({"service": "api"}, {"service": "search"}),
    "read_logs": ({"service": "api"},),
    "list_users": ({},),
}
EDITS: dict[str, tuple[dict[str, Any], ...]] = {
    "drop_table": (
        {"name": "tmp_c", "force": True},
        {"name": "prod_orders", "force": False},
        {"name": "tmp_d", "force": False},
    ),
    "refund_order": ({"order_id": "o-9", "amount_cents": 250000},),
    "delete_user": ({"user_id": "u-102"},),
    "restart_service": ({"service": "search"},),
    "read_logs": ({"service": "db"},),
}
"""What a person may type in the Edit modal, per tool."""


# --- the model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogicalCall:
    """One call of a run's plan, whatever id the model gave it this time."""

    run: str
    """The run's tag (`m3`)."""
    turn: int
    index: int


@dataclass(frozen=True)
class PlannedCall:
    tool: str
    arguments: dict[str, Any]


@dataclass
class ModelPlans:
    """The fake model: each run's plan, answered turn by turn, with fresh call ids."""

    plans: dict[str, list[list[PlannedCall]]] = field(default_factory=dict)
    logical: dict[str, LogicalCall] = field(default_factory=dict)
    """Call id -> the planned call it stands for."""
    sent: dict[str, PlannedCall] = field(default_factory=dict)
    """Call id -> the call as the model sent it (its arguments before any tool's schema)."""
    failures: int = 0
    """Requests to answer with HTTP 500, once `failures_after` more were answered."""
    failures_after: int = 0
    hooks: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Awaited (and removed) by the next request, before it is answered."""
    _ids: itertools.count[int] = field(default_factory=itertools.count)

    async def __call__(self, request: ModelRequest) -> Reply:
        hooks, self.hooks = self.hooks, []
        for hook in hooks:
            await hook()
        if self.failures > 0:
            if self.failures_after > 0:
                self.failures_after -= 1
            else:
                self.failures -= 1
                return ModelError(500, "the model is overloaded")
        tag = request.task.split(" ", 1)[0]
        turns = self.plans.get(tag)
        if turns is None:
            return [message("I have nothing to do.")]
        answered = len(request.tool_outputs)
        asked = 0
        for number, turn in enumerate(turns):
            if answered == asked:
                return [self._item(tag, number, index, call) for index, call in enumerate(turn)]
            asked += len(turn)
        return [message(f"done {tag}")]

    def _item(self, tag: str, turn: int, index: int, call: PlannedCall) -> Item:
        call_id = f"call_{tag}_{turn}_{index}_{next(self._ids)}"
        self.logical[call_id] = LogicalCall(tag, turn, index)
        self.sent[call_id] = call
        return tool_call(call.tool, call.arguments, call_id)


# --- the policies -----------------------------------------------------------------------------

STRICT = f"""
[[rule]]
tool = "drop_table"
when = 'args.name.startsWith("prod_")'
name = "production tables"
approvers = ["UALICE"]

[[rule]]
tool = "drop_table"
when = "args.force == true"
name = "forced drops"
auto = "reject"

[[rule]]
tool = "refund_order"
when = "args.amount_cents <= 10000"
name = "small refunds"
anyone = true

[[rule]]
tool = "refund_order"
name = "large refunds"
approvers = ["UALICE", "UCAROL"]
quorum = 2

[[rule]]
tool = "delete_user"
confirm = "user_id"

[[rule]]
tool = "read_logs"
auto = "approve"

[[rule]]
tool = "restart_service"
approvers = ["UBOB"]
escalate_after_seconds = {ESCALATE_AFTER_SECONDS}
escalate_to = ["UCAROL"]
"""
"""Forced drops are refused outright."""

TYPED = STRICT.replace('auto = "reject"', 'confirm = "name"')
"""Forced drops need the table's name typed."""

POLICIES = {"strict": STRICT, "typed": TYPED}
