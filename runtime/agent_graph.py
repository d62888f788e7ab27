"""Every agent the SDK can reach from a run's agents, and how a nested agent was reached.

A run reaches agents the registry need not list: through a hand-off (an `Agent` in
`handoffs`, or a `Handoff` object made by `handoff(agent)`) and through an agent used as a tool
(`Agent.as_tool`), nested to any depth. What must hold for every call of a run (its tool is
journaled, its MCP server is known for the digest, a waiting tool still exists) must hold for
all of them, so the tool journal, the MCP tools and the resume checks all walk this graph.

The walk follows the same edges as the SDK's own, which it uses to restore a saved run and its
nested agent-tool runs (`agents._run_state_agent_identity._iter_agent_graph`): a `Handoff`'s
`_agent_ref`, and an agent tool's `_agent_instance`. `tests/runtime/runs/test_agent_graph.py`
checks that
the two walks agree, so an SDK upgrade that changes the edges fails there first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

from agents import Agent, FunctionTool, Handoff
from agents.agent_tool_state import (
    drop_agent_tool_run_result,
    get_agent_tool_state_scope,
    peek_agent_tool_run_result,
)
from agents.tool_context import ToolContext


def handoff_targets(agent: Agent[Any]) -> Iterator[Agent[Any]]:
    """The agents `agent` can hand the conversation to."""
    for item in agent.handoffs:
        if isinstance(item, Agent):
            yield item
        elif isinstance(item, Handoff):
            # `handoff(agent)` keeps only a weak reference; the agent lives in its module.
            ref = item._agent_ref
            target = ref() if ref is not None else None
            if isinstance(target, Agent):
                yield target


def tool_agent(tool: object) -> Agent[Any] | None:
    """The agent an `Agent.as_tool` tool runs; None for any other tool."""
    if not isinstance(tool, FunctionTool) or not getattr(tool, "_is_agent_tool", False):
        return None
    agent = getattr(tool, "_agent_instance", None)
    return agent if isinstance(agent, Agent) else None


def tool_agents(agent: Agent[Any]) -> Iterator[Agent[Any]]:
    """The agents `agent` runs as tools."""
    for tool in agent.tools:
        if (inner := tool_agent(tool)) is not None:
            yield inner


def reachable_agents(roots: Iterable[Agent[Any]]) -> list[Agent[Any]]:
    """Every agent reachable from `roots` by hand-offs and agent tools, once each, breadth
    first (the roots first, in order)."""
    seen: dict[int, Agent[Any]] = {}
    pending: deque[Agent[Any]] = deque(roots)
    while pending:
        agent = pending.popleft()
        if id(agent) in seen:
            continue
        seen[id(agent)] = agent
        pending.extend(handoff_targets(agent))
        pending.extend(tool_agents(agent))
    return list(seen.values())


def callers(start: Agent[Any], asking: Agent[Any]) -> tuple[str, ...]:
    """The names of the agents that ran `asking` (or the agent that handed off to it) as a tool,
    outermost first, when `start` (the run's current agent) reached it through agent tools;
    () when `start` asked itself or the path is unknown."""
    paths: dict[int, tuple[str, ...]] = {id(start): ()}
    pending: deque[Agent[Any]] = deque([start])
    while pending:
        agent = pending.popleft()
        path = paths[id(agent)]
        if agent is asking or (path and agent.name == asking.name):
            return path
        # A hand-off inside an agent tool's run stays inside that tool call.
        edges = [(inner, (*path, agent.name)) for inner in tool_agents(agent)]
        if path:
            edges += [(target, path) for target in handoff_targets(agent)]
        for inner, inner_path in edges:
            if id(inner) not in paths:
                paths[id(inner)] = inner_path
                pending.append(inner)
    return ()


def inner_run_interrupted(ctx: ToolContext[Any]) -> bool:
    """Whether the SDK keeps, for this call, an inner run of its agent tool that waits for
    approvals (`agents.agent_tool_state`). Once the tool returned: it stopped for approvals
    inside and has not really returned (its output is None). Before it runs: the restored
    state saved that run, and the tool resumes it rather than starting its agent afresh."""
    if ctx.tool_call is None:
        return False
    pending = peek_agent_tool_run_result(ctx.tool_call, scope_id=get_agent_tool_state_scope(ctx))
    return bool(getattr(pending, "interruptions", None))


def end_inner_run(ctx: ToolContext[Any]) -> None:
    """The agent tool of this call has returned (its output was recorded): forget the inner run
    a restored state saved for it while it waited. Left in the SDK's cache, that run's
    interruptions would be taken for the tool's, so its inner calls would be asked again,
    after every approval, though the journal replays the tool's output."""
    if ctx.tool_call is not None:
        drop_agent_tool_run_result(ctx.tool_call, scope_id=get_agent_tool_state_scope(ctx))
