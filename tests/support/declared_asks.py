"""Each tool's `needs_approval` as declared, given back when an in-process worker stops.

A worker makes a function tool whose output its policy reviews ask at each call
(`runtime.models.install.install_journal`); the agents are module globals that every in-process
worker of a test process shares (a harness's, the console's demo). Whoever starts one notes the
tools first and restores them when it stops, so the next test starts from them as declared.
"""

from __future__ import annotations

from agents import FunctionTool

from runtime.agent_graph import reachable_agents
from runtime.registry import load_registry


class DeclaredAsks:
    def __init__(self) -> None:
        self._asked: dict[int, tuple[FunctionTool, object]] = {}

    def note(self, agents: str) -> None:
        """The tools of the registry `agents` names (`AGENTS`), as they are now."""
        for agent in reachable_agents(agent for _name, agent in load_registry(agents)):
            for tool in agent.tools:
                if isinstance(tool, FunctionTool):
                    self._asked.setdefault(id(tool), (tool, tool.needs_approval))

    def restore(self) -> None:
        for tool, asked in self._asked.values():
            tool.needs_approval = asked  # type: ignore[assignment]
