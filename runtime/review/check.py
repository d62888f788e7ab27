"""Warnings about a policy file that loads (`python -m runtime policy check POLICY.toml`).

- A rule that can never match: an earlier rule matches every call it would (first match wins).
- A glob that matches nothing the registry offers: an agent glob no agent's name matches, a tool
  glob no function tool of those agents matches, an `mcp_server` glob no MCP server of theirs
  matches. An MCP server's tools are listed only when the worker connects, so a tool glob that
  matches no function tool of agents with MCP servers says so instead of being sure.
- `anyone = true` on a tool an earlier rule guards (names approvers or rejects it): the earlier
  rule keeps the calls it matches, and the channel may decide the tool's other calls (another
  agent's, another server's).
- A `when` that would fail on the arguments of a tool it can match: a field the tool does not
  have, or a comparison of unlike types (`runtime.review.when_check`), on the `when`'s line.

Globs are compared as languages (`*`, `?`, a `[...]` class as one character), so `delete_*`
covers `delete_user` and `delete_u*`; a class is taken to overlap any other.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from agents import Agent, FunctionTool, HostedMCPTool

from runtime.agent_graph import reachable_agents
from runtime.policy import Policy, Rule
from runtime.registry import AgentRegistry
from runtime.review.when_check import when_problems


@dataclass(frozen=True, kw_only=True, slots=True)
class Offered:
    """What the registry's agents offer, as far as it is known without running them."""

    tools: dict[str, frozenset[str]]
    """Agent name -> its function tools' names."""
    servers: dict[str, frozenset[str]]
    """Agent name -> its MCP servers' names (hosted ones by their label)."""
    schemas: Mapping[str, Mapping[str, Mapping[str, Any]]] = field(default_factory=dict)
    """Agent name -> its function tools' argument schemas (JSON schema), by tool name."""

    @classmethod
    def of(cls, registry: AgentRegistry) -> Offered:
        agents: list[Agent[object]] = list(reachable_agents(agent for _, agent in registry))
        return cls(
            tools={a.name: frozenset(t.name for t in a.tools if not _hosted(t)) for a in agents},
            servers={a.name: frozenset(_servers(a)) for a in agents},
            schemas={
                a.name: {
                    t.name: t.params_json_schema for t in a.tools if isinstance(t, FunctionTool)
                }
                for a in agents
            },
        )


def _hosted(tool: object) -> bool:
    return isinstance(tool, HostedMCPTool)


def _servers(agent: Agent[object]) -> Iterable[str]:
    yield from (server.name for server in agent.mcp_servers)
    for tool in agent.tools:
        if isinstance(tool, HostedMCPTool):
            yield str(tool.tool_config.get("server_label") or "")


def warnings(policy: Policy, source: str, offered: Offered) -> list[str]:
    """Each warning names the rule's place (`policy.toml:12`) first."""
    found = []
    for index, rule in enumerate(policy.rules):
        where = f"{source}:{policy.rule_lines[index]}"
        earlier = list(enumerate(policy.rules[:index]))
        shadow = next((n for n, e in earlier if _covers(e, rule)), None)
        if shadow is not None:
            found.append(
                f"{where}: this rule never matches: rule {shadow + 1} "
                f"({source}:{policy.rule_lines[shadow]}) matches every call it would."
            )
            continue
        found += [f"{where}: {problem}" for problem in _unmatched(rule, offered)]
        for key in ("when", "review_output_when"):  # both CEL over the call, judged alike
            if (expression := getattr(rule, key)) is not None:
                line = _when_line(source, policy.rule_lines[index], key)
                problems = _when_problems(rule, expression, offered)
                found += [f"{source}:{line}: {p}" for p in problems]
        if rule.anyone:
            for n, guard in earlier:
                if _guards(guard) and _overlap(guard, rule):
                    found.append(
                        f"{where}: `anyone = true` on `{rule.tool}`, which rule {n + 1} "
                        f"({source}:{policy.rule_lines[n]}) guards: the channel may decide "
                        "the calls that rule does not match."
                    )
    return found


def _unmatched(rule: Rule, offered: Offered) -> list[str]:
    agents = [a for a in offered.tools if glob_covers(rule.agent or "*", a)]
    if not agents:
        return [f"agent `{rule.agent}` matches no agent of the registry."]
    problems = []
    servers = sorted({s for a in agents for s in offered.servers[a]})
    if rule.mcp_server is not None:
        if not any(glob_covers(rule.mcp_server, s) for s in servers):
            known = ", ".join(servers) or "none"
            problems.append(
                f"mcp_server `{rule.mcp_server}` matches no MCP server of its agents ({known})."
            )
        return problems  # its tools are the servers', listed only when the worker runs
    tools = {t for a in agents for t in offered.tools[a]}
    if not any(glob_covers(rule.tool, t) for t in tools):
        unless = f" (unless MCP server {', '.join(servers)} offers it)" if servers else ""
        problems.append(f"tool `{rule.tool}` matches no tool of its agents{unless}.")
    return problems


def _when_problems(rule: Rule, when: str, offered: Offered) -> list[str]:
    """What `when` fails on, for each function tool the rule can match (an MCP server's tools
    are listed only when the worker connects)."""
    if rule.mcp_server is not None:
        return []
    schemas = {
        tool: schema
        for agent, tools in offered.schemas.items()
        if fnmatch.fnmatchcase(agent, rule.agent or "*")
        for tool, schema in tools.items()
        if fnmatch.fnmatchcase(tool, rule.tool)
    }
    return when_problems(when, schemas)


def _when_line(source: str, header: int, key: str = "when") -> int:
    """The line of the `when` (or other `key`) of the rule whose `[[rule]]` is on `header`."""
    try:
        lines = Path(source).read_text().splitlines()
    except OSError:
        return header
    for number in range(header, len(lines)):
        if lines[number].strip() == "[[rule]]":
            break
        if re.match(rf"^\s*{key}\s*=", lines[number]):
            return number + 1
    return header


def _guards(rule: Rule) -> bool:
    return not rule.anyone and rule.auto != "approve"


def _covers(earlier: Rule, later: Rule) -> bool:
    """Every call `later` matches, `earlier` matches too."""
    # A `when` is not compared with another, only with the same text.
    if earlier.when is not None and earlier.when != later.when:
        return False
    if earlier.mcp_server is not None and (
        later.mcp_server is None or not glob_covers(earlier.mcp_server, later.mcp_server)
    ):
        return False
    return glob_covers(earlier.tool, later.tool) and glob_covers(
        earlier.agent or "*", later.agent or "*"
    )


def _overlap(one: Rule, other: Rule) -> bool:
    """Some call matches both."""
    servers = (one.mcp_server, other.mcp_server)
    if None not in servers and not globs_meet(one.mcp_server or "", other.mcp_server or ""):
        return False
    return globs_meet(one.tool, other.tool) and globs_meet(one.agent or "*", other.agent or "*")


def glob_covers(wide: str, narrow: str) -> bool:
    """Every name `narrow` matches, `wide` matches (a name is a glob matching only itself)."""
    return _covers_tokens(_tokens(wide), _tokens(narrow))


def globs_meet(one: str, other: str) -> bool:
    """Some name matches both globs."""
    return _meet_tokens(_tokens(one), _tokens(other))


@lru_cache(maxsize=1024)
def _tokens(glob: str) -> tuple[str, ...]:
    """`*`, `?`, a whole `[...]` class, or one literal character each."""
    tokens, at = [], 0
    while at < len(glob):
        end = glob.find("]", at + 2) if glob[at] == "[" else -1
        if end != -1:
            tokens.append(glob[at : end + 1])
            at = end + 1
        else:
            tokens.append(glob[at])
            at += 1
    return tuple(tokens)


def _one_char_covers(wide: str, narrow: str) -> bool:
    if wide == "?" or wide == narrow:
        return True
    if len(wide) > 1 and len(narrow) == 1 and narrow not in "?*":
        # A class against a literal: does the class hold it?
        return fnmatch.fnmatchcase(narrow, wide)
    return False


@lru_cache(maxsize=4096)
def _covers_tokens(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    if not wide:
        return not narrow
    if wide[0] == "*":
        # The star matches nothing more, or also what `narrow`'s first token matches.
        return _covers_tokens(wide[1:], narrow) or (
            bool(narrow) and _covers_tokens(wide, narrow[1:])
        )
    if not narrow or narrow[0] == "*":
        return False
    return _one_char_covers(wide[0], narrow[0]) and _covers_tokens(wide[1:], narrow[1:])


@lru_cache(maxsize=4096)
def _meet_tokens(one: tuple[str, ...], other: tuple[str, ...]) -> bool:
    if not one or not other:
        return all(token == "*" for token in one + other)
    if one[0] == "*":
        return _meet_tokens(one[1:], other) or _meet_tokens(one, other[1:])
    if other[0] == "*":
        return _meet_tokens(one, other[1:]) or _meet_tokens(one[1:], other)
    a, b = one[0], other[0]
    same = a == b or "?" in (a, b) or len(a) > 1 or len(b) > 1
    return same and _meet_tokens(one[1:], other[1:])
