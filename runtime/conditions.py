"""A policy rule's `when`: a CEL expression (the Common Expression Language of Kubernetes
admission policies and cloud IAM conditions) over what a call does.

    when = "args.amount_cents > 100000 && channel == 'C0BILLING'"

Variables: `args` (the call's arguments as the tool receives them: `runtime.judging.arguments`),
`tool`, `agent`, `mcp_server` (null for a function tool), `channel` and `requester` (the run's
Slack ids).

An expression is compiled when the policy loads (`Condition.compile`: a syntax error names the
parser's message), its `==`, `!=` and `in` made strict about types
(`runtime.judging.comparisons`), and evaluated by the `cel` package, never by Python, in a
child process within a budget (`runtime.judging.evaluation`). `Condition.holds` says True or
False, or that the expression cannot be judged for this call and why (a missing field, values
of different types, arguments that are not a JSON object or not known, over budget):
`runtime.policy` then makes the call satisfy that rule and the one it would fall under
otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cel

from runtime.judging.comparisons import Unparsed, strict_source
from runtime.judging.evaluation import WHEN_MAX_CHARS, Outcome, evaluate, too_large

if TYPE_CHECKING:
    from runtime.jobs.contracts import Conversation
    from runtime.record.envelope import PendingCall

UNKNOWN_ARGUMENTS = "the call's arguments are not known"


class ConditionError(ValueError):
    """A `when` that does not compile; the message is the parser's."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CallFacts:
    """What a `when` may read of one call."""

    arguments: str | None
    """As the tool receives them (`runtime.judging.arguments`), or as a person edited them;
    None: not known (a listing, or a trail entry that did not keep them)."""
    tool: str
    agent: str
    mcp_server: str | None = None
    channel: str = ""
    requester: str = ""

    @classmethod
    def of(cls, call: PendingCall, conversation: Conversation) -> CallFacts:
        """A pending call's facts, on the arguments its card shows."""
        return cls(
            arguments=call.arguments,
            tool=call.tool,
            agent=call.agent,
            mcp_server=call.mcp_server,
            channel=conversation.channel,
            requester=conversation.requester,
        )

    def variables(self) -> dict[str, Any] | str:
        """The expression's variables, or why no expression reading them can be trusted."""
        if self.arguments is None:
            return UNKNOWN_ARGUMENTS
        if len(self.arguments) > WHEN_MAX_CHARS:
            return too_large(len(self.arguments))
        try:
            args = json.loads(self.arguments) if self.arguments else {}
        except ValueError:
            return "the arguments are not JSON"
        if not isinstance(args, dict):
            return "the arguments are not a JSON object"
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
    strict: str
    """`source` with its comparisons strict about types (`runtime.judging.comparisons`)."""

    @classmethod
    def compile(cls, source: str) -> Condition:
        try:
            cel.compile(source)
        except (ValueError, RuntimeError) as error:
            raise ConditionError(_parser_message(str(error))) from error
        try:
            strict = strict_source(source)
            cel.compile(strict)
        except (Unparsed, ValueError, RuntimeError) as error:
            raise ConditionError(
                f"its comparisons cannot be made strict about types ({error}); write it "
                "another way, e.g. with parentheses"
            ) from error
        return cls(source, strict)

    async def holds(self, facts: CallFacts | None) -> Outcome:
        """Whether the call meets the expression, or why it cannot be judged for it."""
        variables = UNKNOWN_ARGUMENTS if facts is None else facts.variables()
        if isinstance(variables, str):
            return Outcome(holds=None, reason=variables)
        return await evaluate(self.strict, json.dumps(variables, ensure_ascii=False))


def _parser_message(text: str) -> str:
    """The parser's words without the expression it repeats ("Failed to parse expression …:")."""
    _, found, rest = text.partition("': ")
    message = rest if found and text.startswith("Failed to parse expression") else text
    return message.replace("ERROR: <input>:", "at ").replace("<input>:", "").strip()
