"""Who answers an MCP server's questions: a rule's `elicitation_responders`, checked as the
policy file loads.

The list belongs to a server's rule (`mcp_server`, no `when`): a question comes mid-call, from
the server, and carries no arguments a `when` could judge. The rule is found by the call's
names alone (`responders_for`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

PRINCIPAL_PATTERN = r"^[UWS][A-Z0-9]{2,31}$"


class _Named(Protocol):
    @property
    def elicitation_responders(self) -> tuple[str, ...] | None: ...

    @property
    def mcp_server(self) -> str | None: ...

    @property
    def when(self) -> str | None: ...

    def matches(self, tool: str, agent: str, mcp_server: str | None = None) -> bool: ...


def responders_for(
    rules: Iterable[_Named], tool: str, agent: str, mcp_server: str
) -> tuple[str, ...]:
    """Who answers `mcp_server`'s questions during a call of `tool` by `agent`: the first rule
    matching the call's names that lists `elicitation_responders`; () if none (the requester)."""
    for rule in rules:
        if rule.elicitation_responders and rule.matches(tool, agent, mcp_server):
            return rule.elicitation_responders
    return ()


def responders_problem(rule: _Named, name: str) -> tuple[str, str] | None:
    """The key to point at and why, when a rule's `elicitation_responders` cannot be used."""
    responders = rule.elicitation_responders
    if responders is None:
        return None
    for principal in responders:
        if not re.match(PRINCIPAL_PATTERN, principal):
            return "elicitation_responders", (
                f"{principal!r} is not a Slack user (U…, W…) or user-group (S…) id."
            )
    if not responders:
        return "elicitation_responders", (
            f"{name} `elicitation_responders` is empty. List who answers, or leave it out to "
            "let the run's requester answer."
        )
    if rule.mcp_server is None or rule.when is not None:
        return "elicitation_responders", (
            f"{name} `elicitation_responders` needs `mcp_server` and no `when`: it says who "
            "answers that server's questions."
        )
    return None
