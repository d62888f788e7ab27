"""Putting the journal around every tool and model a worker's agents can call, once, at start."""

from __future__ import annotations

from agents import FunctionTool, Model

from runtime.agent_graph import reachable_agents, tool_agent
from runtime.journal.invoker import JournaledInvoker
from runtime.journal.tool_kinds import journal_tool_kind
from runtime.judging.tool_schemas import function_tool_schema
from runtime.models.journaled import journaled_model
from runtime.policy import Policy
from runtime.registry import AgentRegistry


def install_journal(registry: AgentRegistry, policy: Policy | None = None) -> int:
    """Wrap every tool that runs in the worker, of every agent the registry's agents reach
    (once): function tools here, shell, local shell, apply_patch and custom tools in
    `runtime.journal.tool_kinds`; return how many. A `Model` an agent holds itself (rather
    than a name the run config's provider resolves, `runtime.models.journaled`) has its turns
    journaled too. A function tool that a rule of `policy` may review the output of asks the
    policy at each call (`needs_approval`), so that its output can be held
    (`runtime.journal.held`); the rule's `auto = "approve"` lets it run without a card."""
    wrapped = 0
    for agent in reachable_agents(agent for _name, agent in registry):
        if isinstance(agent.model, Model):
            agent.model = journaled_model(agent.model)
        for tool in agent.tools:
            if isinstance(tool, FunctionTool):
                if policy is not None and _reviewed(policy, tool, agent.name):
                    tool.needs_approval = True
                if not isinstance(tool.on_invoke_tool, JournaledInvoker):
                    # Its model first: `FunctionTool.__wrapped__` goes with the SDK's invoker.
                    schema = function_tool_schema(tool)
                    tool.on_invoke_tool = JournaledInvoker(
                        tool.name,
                        tool.on_invoke_tool,
                        argument_schema=schema,
                        agent_tool=tool_agent(tool) is not None,
                    )
                    wrapped += 1
            else:
                wrapped += journal_tool_kind(agent, tool)
    return wrapped


def _reviewed(policy: Policy, tool: FunctionTool, agent: str) -> bool:
    """Whether a rule of `policy` may hold the output of `tool`'s calls, while it asks nobody."""
    if tool.needs_approval is not False:
        return False
    return any(
        rule.matches(tool.name, agent) and (rule.review_output or rule.review_output_when)
        for rule in policy.rules
    )
