"""Putting the journal around every tool and model a worker's agents can call, once, at start."""

from __future__ import annotations

from agents import FunctionTool, Model

from runtime.agent_graph import reachable_agents
from runtime.journal.invoker import JournaledInvoker
from runtime.journal.tool_kinds import journal_tool_kind
from runtime.judging.tool_schemas import function_tool_schema
from runtime.models.journaled import journaled_model
from runtime.registry import AgentRegistry


def install_journal(registry: AgentRegistry) -> int:
    """Wrap every tool that runs in the worker, of every agent the registry's agents reach
    (once): function tools here, shell, local shell, apply_patch and custom tools in
    `runtime.journal.tool_kinds`; return how many. A `Model` an agent holds itself (rather
    than a name the run config's provider resolves, `runtime.models.journaled`) has its turns
    journaled too."""
    wrapped = 0
    for agent in reachable_agents(agent for _name, agent in registry):
        if isinstance(agent.model, Model):
            agent.model = journaled_model(agent.model)
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                if not isinstance(tool.on_invoke_tool, JournaledInvoker):
                    # Its model first: `FunctionTool.__wrapped__` goes with the SDK's invoker.
                    schema = function_tool_schema(tool)
                    tool.on_invoke_tool = JournaledInvoker(
                        tool.name, tool.on_invoke_tool, argument_schema=schema
                    )
                    wrapped += 1
            else:
                wrapped += journal_tool_kind(agent, tool)
    return wrapped
