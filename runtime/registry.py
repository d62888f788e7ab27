"""The agents a deployment offers, loaded from `AGENTS` (`module:attribute`)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from agents import Agent

from runtime.agent_graph import reachable_agents
from runtime.calls.description import refusal


class RegistryError(Exception):
    """The registry cannot be loaded or is not usable; the message says how to fix it."""


class UnknownAgent(LookupError):
    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(f"no agent named {name!r}; known agents: {', '.join(known)}")
        self.name = name
        self.known = tuple(known)


class AgentRegistry:
    """Agents by name; the first one is the default."""

    def __init__(self, agents: Sequence[Agent[Any]] | Mapping[str, Agent[Any]]) -> None:
        pairs = (
            list(agents.items())
            if isinstance(agents, Mapping)
            else [(agent.name, agent) for agent in agents]
        )
        if not pairs:
            raise RegistryError("the agent registry is empty; add at least one Agent")
        self._agents: dict[str, Agent[Any]] = {}
        for name, agent in pairs:
            if not isinstance(agent, Agent):
                raise RegistryError(f"registry entry {name!r} is not an agents.Agent")
            if name in self._agents:
                raise RegistryError(f"two agents are registered as {name!r}; names must differ")
            self._agents[name] = agent
        # Every agent a run can reach (hand-offs, agents used as tools), listed here or not.
        for agent in reachable_agents(self._agents.values()):
            for tool in agent.tools:
                if (why := refusal(agent.name, tool)) is not None:
                    raise RegistryError(why)

    @property
    def default(self) -> Agent[Any]:
        return next(iter(self._agents.values()))

    @property
    def names(self) -> list[str]:
        return list(self._agents)

    @property
    def lines(self) -> dict[str, str]:
        """Each agent's one line for people choosing one: its `handoff_description`, else the
        first line of its instructions (when they are text), else nothing."""
        found = {}
        for name, agent in self._agents.items():
            text = agent.handoff_description
            if not text and isinstance(agent.instructions, str):
                text = agent.instructions
            found[name] = (text or "").strip().split("\n", 1)[0]
        return found

    def __iter__(self) -> Iterator[tuple[str, Agent[Any]]]:
        return iter(self._agents.items())

    def __contains__(self, name: object) -> bool:
        return name in self._agents

    def get(self, name: str) -> Agent[Any]:
        try:
            return self._agents[name]
        except KeyError:
            raise UnknownAgent(name, self.names) from None


def load_registry(spec: str) -> AgentRegistry:
    """Import `module:attribute` and wrap the list or dict of agents it names."""
    module_name, _, attribute = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise RegistryError(
            f"AGENTS={spec}: cannot import module {module_name!r} ({error}). "
            "Check the module path and that it is installed or on PYTHONPATH."
        ) from error
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise RegistryError(f"AGENTS={spec}: {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not isinstance(target, Sequence | Mapping):
        raise RegistryError(
            f"AGENTS={spec}: expected a list of Agent objects or a dict name -> Agent"
        )
    return AgentRegistry(target)
