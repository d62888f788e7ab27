"""A waiting run brought back: its SDK `RunState` restored and the round's decisions applied.

The state is restored without any approval the SDK would make of later calls by itself (an
`always_approve` an earlier version gave): every later call comes back to the policy
(`runtime.record.permissions`)."""

from __future__ import annotations

import logging
from typing import Any

from agents import Agent, RunState
from agents.exceptions import AgentsException

from runtime.failures import RunFailed
from runtime.mcp.origin import mcp_server_of
from runtime.mcp.tools import McpTools
from runtime.record.envelope import RunEnvelope
from runtime.record.run_record import RunRecord
from runtime.reporter import Failure
from runtime.runs.state_decisions import (
    Applied,
    apply_decisions,
    missing_tools,
    without_sticky_approvals,
)

log = logging.getLogger(__name__)


async def restore(agent: Agent[Any], record: RunRecord, mcp: McpTools | None) -> RunState[Any, Any]:
    """The run's SDK state, or `RunFailed` when it cannot be restored (a vanished MCP server
    raises as it is: the job is retried)."""
    if record.state is None:
        raise RunFailed(Failure.UNREADABLE_STATE, "the run has no stored state")
    try:
        # A state an earlier version saved after its `always_approve`: every call is judged.
        return await RunState.from_string(agent, without_sticky_approvals(record.state))
    except Exception as error:
        if mcp is not None and await mcp.unreachable(agent):
            raise  # a server went away since it was found ready: the job is retried
        # The SDK redacts its restore errors; its message is safe and names the cause.
        log.exception("run %s: stored state cannot be restored", record.envelope.run_id)
        raise RunFailed(Failure.UNREADABLE_STATE, str(error)) from error


def apply_round(
    state: RunState[Any, Any], envelope: RunEnvelope, root: Agent[Any], mcp: McpTools | None
) -> Applied:
    """The round's decisions applied to `state` (`RunFailed` when a waiting call's tool is gone
    or the state was edited behind the SDK's back)."""
    missing = missing_tools(state, root, mcp.offered if mcp else None)
    if missing:
        detail = ", ".join(f"`{tool}` of agent {agent}" for agent, tool in missing)
        raise RunFailed(Failure.TOOL_REMOVED, detail)
    try:
        return apply_decisions(state, envelope.calls, mcp.server_now if mcp else mcp_server_of)
    except AgentsException as error:
        # The SDK fingerprints each tool call; a state edited behind its back fails here.
        log.error("run %s: stored state is inconsistent: %s", envelope.run_id, error)
        detail = "the stored run state is inconsistent; it may have been edited"
        raise RunFailed(Failure.UNREADABLE_STATE, detail) from error
