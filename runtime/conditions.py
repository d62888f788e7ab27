"""A policy rule's `when`: a CEL expression (the Common Expression Language of Kubernetes
admission policies and cloud IAM conditions) over what a call does.

    when = "args.amount_cents > 100000 && channel == 'C0BILLING'"

Variables: `args` (the call's arguments, a map when they are a JSON object), `tool`, `agent`,
`mcp_server` (null for a function tool), `channel` and `requester` (the run's Slack ids).

An expression is compiled when the policy loads (`Condition.compile`, a syntax error names the
parser's message) and evaluated by the `cel` package, never by Python. `Condition.holds` is
True or False, or None when the expression cannot be evaluated for this call (a missing field,
a wrong type, arguments that are not JSON, or no arguments at all): `runtime.policy` then keeps
the rule and loosens nothing under it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cel

if TYPE_CHECKING:
    from runtime.jobs.contracts import Conversation
    from runtime.record.envelope import PendingCall


class ConditionError(ValueError):
    """A `when` that does not compile; the message is the parser's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFacts:
    """What a `when` may read of one call."""

    arguments: str | None
    """As the model sent them (or a person edited them); None: not known (a listing, or a
    trail entry that did not keep them)."""
    tool: str
    agent: str
    mcp_server: str | None = None
    channel: str = ""
    requester: str = ""

    @classmethod
    def of(cls, call: PendingCall, conversation: Conversation) -> CallFacts:
        """A pending call's facts, on the arguments the model sent."""
        return cls(
            arguments=call.arguments,
            tool=call.tool,
            agent=call.agent,
            mcp_server=call.mcp_server,
            channel=conversation.channel,
            requester=conversation.requester,
        )

    def variables(self) -> dict[str, Any] | None:
        """The expression's variables; None when the arguments are unknown or not a JSON
        object, so that no expression reading them can be trusted."""
        if self.arguments is None:
            return None
        try:
            args = json.loads(self.arguments) if self.arguments else {}
        except ValueError:
            return None
        if not isinstance(args, dict):
            return None
        return {
            "args": args,
            "tool": self.tool,
            "agent": self.agent,
            "mcp_server": self.mcp_server,
            "channel": self.channel,
            "requester": self.requester,
        }


@dataclass(frozen=True, slots=True)
class Condition:
    source: str
    program: cel.Program

    @classmethod
    def compile(cls, source: str) -> Condition:
        try:
            program = cel.compile(source)
        except (ValueError, RuntimeError) as error:
            raise ConditionError(_parser_message(str(error))) from error
        return cls(source, program)

    def holds(self, facts: CallFacts | None) -> bool | None:
        """Whether the call meets the expression; None: it cannot be evaluated for it."""
        variables = None if facts is None else facts.variables()
        if variables is None:
            return None
        try:
            result = self.program.execute(variables)
        except (KeyError, TypeError, RuntimeError, ValueError, OverflowError):
            return None
        # A value that is not a boolean (`args.amount_cents`) decides nothing.
        return result if isinstance(result, bool) else None


def _parser_message(text: str) -> str:
    """The parser's words without the expression it repeats ("Failed to parse expression …:")."""
    _, found, rest = text.partition("': ")
    message = rest if found and text.startswith("Failed to parse expression") else text
    return message.replace("ERROR: <input>:", "at ").replace("<input>:", "").strip()
