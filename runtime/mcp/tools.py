"""Tools from MCP servers as first-class tools of the registry's agents, in the worker.

The SDK builds an agent's MCP tools afresh from its servers' listings on every turn and on
every restore of a saved run (`Agent.get_mcp_tools`), so they cannot be wrapped once at start
like function tools. `McpTools.install` decorates each agent the registry reaches
(`runtime.agent_graph`: hand-offs, agents used as tools) that has `mcp_servers`: its
`get_mcp_tools` still is the SDK's (listing, tool filters, names, `require_approval`), and
then, for every MCP tool listed,
- its invoker goes into the tool journal (exactly once, as for function tools);
- a policy rule naming `mcp_server` that matches it makes it need approval, whatever the
  server's own `require_approval` says (unless the rule is `auto = "approve"`);
- its invoker is known as in flight while it runs, so that a question its server asks
  (`elicitation/create`) reaches the call's people (`runtime.mcp.asking`);
- its server and description are remembered: the per-process listing that the cards and the
  check that a waiting tool still exists read.

Servers connect through `McpConnections`; each time all of an agent's servers are up, its
listing is published for the web process (`runtime.mcp.listing`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import redis.asyncio as aioredis
from agents import Agent, FunctionTool, RunContextWrapper, Tool, ToolApprovalItem
from agents.mcp import MCPServer
from agents.tool import ToolOriginType, get_function_tool_origin

from runtime.agent_graph import reachable_agents
from runtime.audit.arguments import KeptArguments
from runtime.db.keys import Keys
from runtime.journal.invoker import JournaledInvoker
from runtime.judging.arguments import ArgumentSchema
from runtime.mcp.asking import McpQuestions, QuestionNotices
from runtime.mcp.connections import McpConnections
from runtime.mcp.listing import McpListings, McpToolInfo
from runtime.mcp.origin import mcp_server_of
from runtime.mcp.questions import QuestionStore
from runtime.mcp.sessions import let_ask
from runtime.policy import Policy
from runtime.registry import AgentRegistry
from runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)


def servers_of(agents: Sequence[Agent[Any]]) -> list[MCPServer]:
    """The distinct server objects these agents use, in order."""
    found: dict[int, MCPServer] = {}
    for agent in agents:
        for server in agent.mcp_servers:
            found.setdefault(id(server), server)
    return list(found.values())


class McpTools:
    def __init__(
        self,
        registry: AgentRegistry,
        policy: Policy,
        *,
        listings: McpListings | None = None,
        questions: McpQuestions | None = None,
        probe_interval: float = 5.0,
        wait_seconds: float = 30.0,
    ) -> None:
        self._agents = [
            a for a in reachable_agents(agent for _name, agent in registry) if a.mcp_servers
        ]
        self._policy = policy
        self._listings = listings
        self._questions = questions
        self._listed: dict[str, dict[str, McpToolInfo]] = {}
        self._schemas: dict[tuple[str, str], ArgumentSchema] = {}
        self.connections = McpConnections(
            servers_of(self._agents),
            probe_interval=probe_interval,
            wait_seconds=wait_seconds,
            on_connect=self._publish,
        )

    def install(self) -> int:
        """Decorate every registry agent that has MCP servers; return how many."""
        for agent in self._agents:
            object.__setattr__(agent, "get_mcp_tools", self._lister(agent))
        if self._questions is not None:
            for server in servers_of(self._agents):
                callback = self._questions.callback(server.name)
                let_ask(server, callback, wait_seconds=self._questions.longest_wait)
        return len(self._agents)

    def _lister(self, agent: Agent[Any]) -> Any:
        async def get_mcp_tools(run_context: RunContextWrapper[Any]) -> list[Tool]:
            # The class's own method: installing again (a second worker in one process)
            # replaces the decoration instead of stacking it.
            tools = await type(agent).get_mcp_tools(agent, run_context)
            self._adopt(agent, tools)
            return tools

        return get_mcp_tools

    def _adopt(self, agent: Agent[Any], tools: list[Tool]) -> None:
        listed: dict[str, McpToolInfo] = {}
        for tool in tools:
            origin = get_function_tool_origin(tool) if isinstance(tool, FunctionTool) else None
            if not isinstance(tool, FunctionTool) or origin is None:
                continue
            if origin.type != ToolOriginType.MCP:
                continue
            server = origin.mcp_server_name or "?"
            listed[tool.name] = McpToolInfo(
                tool=tool.name, server=server, description=tool.description or ""
            )
            # Checked against the listed schema, never converted: the server gets the text.
            schema = ArgumentSchema.of_json_schema(tool.params_json_schema)
            self._schemas[(agent.name, tool.name)] = schema
            if self._policy_requires_approval(tool.name, agent.name, server):
                tool.needs_approval = True
            if not isinstance(tool.on_invoke_tool, JournaledInvoker):
                inner = tool.on_invoke_tool
                if self._questions is not None:
                    inner = self._questions.tracked(server, tool.name, inner)
                tool.on_invoke_tool = JournaledInvoker(
                    tool.name, inner, mcp_server=server, argument_schema=schema
                )
        self._listed[agent.name] = listed

    def _policy_requires_approval(self, tool: str, agent: str, server: str) -> bool:
        # No arguments at listing: a `when` rule cannot be judged, so it asks (its calls are
        # put to the rules again, with their arguments, as they are made).
        match = self._policy.match(tool, agent, server)
        indices = [u.index for u in match.unjudged]
        if match.index is not None:
            indices.append(match.index)
        named = any(self._policy.rules[i].mcp_server is not None for i in indices)
        # A rule that may hold the output asks at each call, so that it can (`journal.held`).
        rules = [self._policy.rules[i] for i in indices]
        reviewed = any(rule.review_output or rule.review_output_when for rule in rules)
        return reviewed or (named and self._policy.resolve(match).auto != "approve")

    # --- what runs and cards need ----------------------------------------------------------

    def info(self, agent: str, tool: str) -> McpToolInfo | None:
        """The tool as this worker last listed it for `agent`, if it is an MCP tool."""
        return self._listed.get(agent, {}).get(tool)

    def schema(self, agent: str, tool: str) -> ArgumentSchema | None:
        """The JSON schema of an MCP tool as this worker last listed it for `agent`."""
        return self._schemas.get((agent, tool))

    def offered(self, agent: Agent[Any]) -> set[str]:
        """The MCP tools `agent` offered at its last listing (a restore lists them afresh)."""
        return set(self._listed.get(agent.name, {}))

    def server_now(self, item: ToolApprovalItem) -> str | None:
        """The server a pending call would run on now: the current listing's, else the one
        the saved call names."""
        listed = self.info(item.agent.name, item.name or "")
        return listed.server if listed is not None else mcp_server_of(item)

    async def ensure_ready(self, root: Agent[Any]) -> None:
        """Every server the run of `root` may use answers (McpServerUnavailable if not, after
        the connections' bounded wait)."""
        servers = servers_of(reachable_agents([root]))
        if servers:
            await self.connections.ensure(servers)

    async def unreachable(self, root: Agent[Any]) -> str | None:
        """The name of a server of this run that does not answer now, if any."""
        return await self.connections.first_unreachable(servers_of(reachable_agents([root])))

    async def _publish(self, server: MCPServer) -> None:
        """A server (re)connected: list and publish each agent whose servers are all up."""
        for agent in self._agents:
            if not any(s is server for s in agent.mcp_servers):
                continue
            if not all(self.connections.is_up(s) for s in agent.mcp_servers):
                continue
            try:
                await agent.get_mcp_tools(RunContextWrapper(context={}))
                tools = list(self._listed.get(agent.name, {}).values())
                if self._listings is not None:
                    await self._listings.publish(agent.name, tools)
            except Exception:
                log.warning("MCP tools of agent %s not listed", agent.name, exc_info=True)
                continue
            log.info("agent %s: %d MCP tool(s) listed", agent.name, len(tools))


def installed_mcp_tools(
    settings: RuntimeSettings,
    registry: AgentRegistry,
    policy: Policy,
    *,
    redis: aioredis.Redis,
    keys: Keys,
    kept: KeptArguments,
    notices: QuestionNotices | None,
) -> McpTools | None:
    """The registry's MCP tools, installed (their servers' questions shown through `notices`,
    their answers' values audited as `kept` says); None when no agent has any."""
    store = QuestionStore(redis, keys, kept=kept)
    wait = settings.elicitation_timeout_seconds
    mcp = McpTools(
        registry,
        policy,
        listings=McpListings(redis, keys),
        questions=McpQuestions(store, policy, notices, wait_seconds=wait),
        probe_interval=settings.mcp_probe_seconds,
        wait_seconds=settings.mcp_wait_seconds,
    )
    return mcp if mcp.install() > 0 else None
