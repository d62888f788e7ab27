"""What each run of the chaos test (`tests/faults/test_chaos.py`) asks, and the model that asks it.

Every kind of call `tests.support.agents:CHAOS_REGISTRY` has: function tools (some slow, so a kill
lands
inside), a `ShellTool` call, an agent tool (`roll_keys`, needing approval) whose inner agent asks
for its own tool in turn (two cards, one after the other), and a tool of an agent reached only
through a `handoff(mechanic)` object (the model hands off first, in the run's last round).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from typing import Any

from tests.support.fake_openai import (
    Item,
    ModelError,
    ModelRequest,
    Reply,
    message,
    shell_call,
    tool_call,
)

APPROVERS = ("UBOB", "UCAROL")
OUTPUTS = {
    "delete_user": "deleted {}",
    "restart_service": "restarted {}",
    "drain_node": "drained {}",
    "shell": "ran echo {}",
    "rotate_key": "rotated {}",
    "cordon_node": "cordoned {}",
}
NESTED_TOOL = "roll_keys"
NESTED_IN_CHAOS = True
"""Whether runs ask for `roll_keys` (run 3 always, others at random). `CHAOS_NESTED=0` leaves
it out, to tell a failure of the agent tool from the others'."""
HANDOFF_TO = "mechanic"


@dataclass(frozen=True, kw_only=True)
class PlannedCall:
    tag: str
    """Unique to the call, in its arguments: finds its card."""
    tool: str
    arguments: dict[str, Any]
    reason: str | None
    """The rejection reason; None: approved."""
    decider: str
    inner: PlannedCall | None = None
    """`roll_keys`' inner agent's call, asked once this one is approved."""
    handoff: bool = False
    """The model hands off to `mechanic` before asking this call."""

    @property
    def call_id(self) -> str:
        return f"call_{self.tag}"

    @property
    def output(self) -> str:
        return OUTPUTS[self.tool].format(self.tag)

    def item(self) -> Item:
        if self.tool == "shell":
            return shell_call(self.arguments["commands"], self.call_id)
        return tool_call(self.tool, self.arguments, self.call_id)


@dataclass(frozen=True, kw_only=True)
class Plan:
    number: int
    rounds: tuple[tuple[PlannedCall, ...], ...]

    @property
    def task(self) -> str:
        return f"chaos run {self.number}"

    @property
    def calls(self) -> list[PlannedCall]:
        """The calls the run's own model asks (not the inner agents')."""
        return [call for calls in self.rounds for call in calls]

    @property
    def all_calls(self) -> list[PlannedCall]:
        return [c for call in self.calls for c in (call, call.inner) if c is not None]


def inner_task(outer_tag: str) -> str:
    """What `roll_keys` is asked: the inner agent's task."""
    return f"rotate for {outer_tag}"


def plan_run(number: int, rng: random.Random) -> Plan:
    """One or two rounds of approvals, of one or two calls each (sometimes a shell); about a
    third rejected. Sometimes a round of the agent tool, sometimes a last round through the
    handoff. Every seed has each kind, approved: run 2 a shell call, run 3 the agent tool,
    run 4 the handoff."""

    def decided(tag: str, forced: bool | None = None) -> dict[str, Any]:
        rejected = rng.random() < 0.35 if forced is None else forced
        return {
            "reason": f"not during the freeze ({tag})" if rejected else None,
            "decider": rng.choice(APPROVERS),
        }

    def seconds() -> float:
        return round(rng.uniform(0.3, 1.2), 2)

    rounds: list[tuple[PlannedCall, ...]] = []
    for round_ in range(rng.choice((1, 2))):
        calls = []
        for index in range(rng.choice((1, 1, 2))):
            tag = f"x{number:02d}{round_}{index}"
            tool = rng.choice(
                ("delete_user", "restart_service", "drain_node", "drain_node", "shell")
            )
            if (number, round_, index) == (2, 0, 0):
                tool = "shell"
            arguments_of: dict[str, dict[str, Any]] = {
                "delete_user": {"user_id": tag},
                "restart_service": {"service": tag},
                "drain_node": {"node": tag, "seconds": seconds()},
                "shell": {"commands": [f"echo {tag}"]},
            }
            forced = None
            if (number, round_, index) in ((0, 0, 0), (1, 0, 0), (2, 0, 0)):
                forced = number == 1  # every seed has both kinds
            calls.append(
                PlannedCall(
                    tag=tag, tool=tool, arguments=arguments_of[tool], **decided(tag, forced)
                )
            )
        rounds.append(tuple(calls))
    nested = os.environ.get("CHAOS_NESTED", "1" if NESTED_IN_CHAOS else "0") == "1"
    if nested and (number == 3 or rng.random() < 0.25):
        tag, key = f"n{number:02d}", f"k{number:02d}"
        inner = PlannedCall(
            tag=key,
            tool="rotate_key",
            arguments={"key": key, "seconds": seconds()},
            **decided(key, False if number == 3 else None),
        )
        outer = PlannedCall(
            tag=tag,
            tool=NESTED_TOOL,
            arguments={"input": inner_task(tag)},
            inner=inner,
            **decided(tag, False if number == 3 else None),
        )
        rounds.insert(rng.randrange(len(rounds) + 1), (outer,))
    if number == 4 or rng.random() < 0.25:
        tag = f"h{number:02d}"
        rounds.append(
            (
                PlannedCall(
                    tag=tag,
                    tool="cordon_node",
                    arguments={"node": tag, "seconds": seconds()},
                    handoff=True,
                    **decided(tag, False if number == 4 else None),
                ),
            )
        )
    return Plan(number=number, rounds=tuple(rounds))


class ChaosModel:
    """Asks for each round's calls in turn (handing off first where the round says so), then
    answers with what it was told of each; as `roll_keys`' inner agent, asks its call, then
    answers `inner <what it was told>`. The run's own model fails with a 5xx while
    `failures_left` says so."""

    def __init__(self, plans: list[Plan]) -> None:
        self.plans = {plan.task: plan for plan in plans}
        self.inner = {
            inner_task(call.tag): call.inner
            for plan in plans
            for call in plan.calls
            if call.inner is not None
        }
        self.failures_left = 0
        self.errors = 0

    def __call__(self, request: ModelRequest) -> Reply:
        told = request.tool_outputs
        inner = self.inner.get(request.task)
        if inner is not None:
            # Never fails: a 5xx inside an agent tool's inner run is that tool's output (the
            # SDK's `failure_error_function`), recorded as its outcome; not what this test is for.
            if inner.call_id not in told:
                return [inner.item()]
            return [message(f"inner {told[inner.call_id]}")]
        if self.failures_left > 0:
            self.failures_left -= 1
            self.errors += 1
            return ModelError(503)
        plan = self.plans[request.task]
        for calls in plan.rounds:
            if any(call.call_id not in told for call in calls):
                transfer = f"transfer_to_{HANDOFF_TO}"
                if calls[0].handoff and transfer in request.tools:
                    return [tool_call(transfer, {}, f"call_to_{calls[0].tag}")]
                return [call.item() for call in calls]
        said = " | ".join(f"{call.call_id}={told[call.call_id]}" for call in plan.calls)
        return [message(f"{plan.task} done: {said}")]
