"""Who may decide which tool calls, how many must agree, and which need nobody.

The policy file (`POLICY_FILE`, TOML) holds rules matched in order, first match wins:

    [[rule]]
    tool = "delete_*"          # glob on the tool name
    agent = "ops"              # optional glob on the agent name
    mcp_server = "db*"         # optional glob on the MCP server's name (MCP tools only)
    when = "args.amount_cents > 100000"   # optional CEL expression (runtime.conditions)
    confirm = "order_id"       # approving needs the approver to type this argument's value
    review_output = true       # hold the tool's output until a person releases it
    review_output_when = "args.table == 'customers'"   # or only when this holds (CEL)
    approvers = ["S0SRE"]      # Slack user (U…/W…) or user-group (S…) ids
    quorum = 2                 # distinct approvers needed (default 1)
    anyone = false             # true instead of approvers: anyone in the channel may decide
    external = false           # true: Slack Connect users and guests may decide too (default
                               # EXTERNAL_DECIDERS: only full members of the workspace)
    ttl_seconds = 900          # how long the approval waits (default APPROVAL_TTL_SECONDS)
    allow_always = false       # offer "Approve always"? (default: only when quorum is 1)
    auto = "approve"           # or "reject": decided without asking anyone
    grant_max_seconds = 3600   # longest grant offered (default GRANT_MAX_SECONDS; 0: none)
    allow_edit = false         # hide "Edit" (default true)
    answer = false             # hide "Answer instead" (default true)
    preview = false            # never call the tool's preview (default true): it is a read
                               # nobody approved, shown to the whole channel
    notify = ["U0LEAD", "C0OPS"]   # copies of the card: a user's DMs, a group's, a channel
    channel = "C0APPROVALS"    # where the cards of runs started in a direct message with the
                               # app go (default APPROVAL_CHANNEL)
    escalate_after_seconds = 600   # still undecided then: escalate_to may decide too, and
    escalate_to = ["S0ONCALL"]     # get a copy and a mention in the thread
    elicitation_responders = ["U0DBA"]  # who answers the server's questions (default: requester)

Where a rule says nothing, the environment's defaults apply (`APPROVERS`,
`APPROVAL_TTL_SECONDS`, `GRANT_MAX_SECONDS`); grants are never offered under a quorum. Letting
anyone decide must be said (`anyone = true`): an empty `approvers = []` is refused, as is a
quorum larger than the user ids a rule lists (without groups, nobody else could ever approve).
A rule with `mcp_server` matches only tools from a matching MCP server, and makes their calls
need a person (or decides them, with `auto`) whatever the server's own `require_approval` says
(see `runtime.mcp.tools`). A rule with `when` matches only calls its expression holds for; one
it cannot be judged for (a missing field, values of different types, over its budget) holds
neither true nor false: the call must satisfy both that rule and the one the policy goes on to
(`runtime.record.call_rule.stricter`), and nothing approves it by itself. The runtime stores
the resolved rule with each pending call, so a policy change never changes what an open card
promised. Every call meets the policy in one place (`runtime.policy.verdicts`), which also
checks grants, Approve always and automatic approvals against the rule the call falls under.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from runtime.conditions import UNKNOWN_ARGUMENTS, CallFacts, Condition
from runtime.judging.evaluation import Outcome
from runtime.record.call_rule import CallRule, Unjudged, stricter

__all__ = ["CallRule", "Match", "Policy", "PolicyError", "Rule", "parse_principals"]

AUDIENCE_PATTERN = r"^[UWSCG][A-Z0-9]{2,31}$"
"""Who can be told of a call: people, user groups, and channels."""
CHANNEL_PATTERN = r"^[CG][A-Z0-9]{2,31}$"
"""A channel a card can be posted in (a rule's `channel`, `APPROVAL_CHANNEL`)."""


class PolicyError(Exception):
    """The policy file cannot be used; the message names the line and the reason."""


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str = Field(min_length=1)
    agent: str | None = None
    mcp_server: str | None = None
    approvers: tuple[str, ...] | None = None
    anyone: bool = False
    """Anyone in the channel may decide, whatever `APPROVERS` says."""
    external: bool | None = None
    """People outside the installing workspace (or its enterprise) may decide too; unset:
    `EXTERNAL_DECIDERS`."""
    quorum: int = Field(1, ge=1, le=20)
    ttl_seconds: int | None = Field(None, ge=1, le=604800)
    allow_always: bool | None = None
    auto: Literal["approve", "reject"] | None = None
    grant_max_seconds: int | None = Field(None, ge=0, le=604800)
    allow_edit: bool = True
    answer: bool = True
    """Offer **Answer instead**: a person's answer stands in for the tool's output."""
    preview: bool = True
    """Call the tool's preview (`runtime.calls.previews`) for the card."""
    notify: tuple[str, ...] = ()
    channel: str | None = Field(None, pattern=CHANNEL_PATTERN)
    """Where the cards of a run started in a direct message with the app go (its requester's
    conversation is private to them); unset: `APPROVAL_CHANNEL`."""
    escalate_after_seconds: int | None = Field(None, ge=1, le=604800)
    escalate_to: tuple[str, ...] = ()
    name: str | None = Field(None, min_length=1, max_length=80)
    """What the card calls the rule ("refunds over $1,000"); unset: its `when`."""
    when: str | None = Field(None, min_length=1)
    """A CEL expression over the call (`runtime.conditions`), compiled as the file loads."""
    confirm: str | None = Field(None, min_length=1)
    """An argument's name: whoever approves types its value (checked by the decision script)."""
    elicitation_responders: tuple[str, ...] | None = None
    """Who answers its MCP server's questions (`runtime.policy.responders`); unset: requester."""
    review_output: bool = False
    """Hold the tool's output until a person releases it (`runtime.journal.held`)."""
    review_output_when: str | None = Field(None, min_length=1)
    """A CEL expression over the call, judged like `when`: its output is held when it holds,
    or cannot be judged."""
    _condition: Condition | None = PrivateAttr(None)
    _review_condition: Condition | None = PrivateAttr(None)

    @field_validator("when", "review_output_when")
    @classmethod
    def _compiles(cls, when: str | None) -> str | None:
        if when is not None:
            Condition.compile(when)  # a ConditionError (a ValueError) names the parser's message
        return when

    def model_post_init(self, context: object, /) -> None:
        self._condition = None if self.when is None else Condition.compile(self.when)
        review = self.review_output_when
        self._review_condition = None if review is None else Condition.compile(review)

    async def reviews_output(self, facts: CallFacts) -> bool:
        """Whether a person reviews the call's output before the model reads it: `review_output`,
        or a `review_output_when` that holds or cannot be judged (within its budget)."""
        if self.review_output:
            return True
        if self._review_condition is None:
            return False
        return (await self._review_condition.holds(facts)).holds is not False

    async def holds(self, facts: CallFacts | None) -> Outcome:
        """Whether the call meets `when` (true without one), or why it cannot be judged."""
        if self._condition is None:
            return Outcome(holds=True)
        return await self._condition.holds(facts)

    @property
    def label(self) -> str:
        """How people know the rule: its `name`, else its `when`, else its tool."""
        return self.name or self.when or f"tool = {self.tool}"

    @model_validator(mode="after")
    def _escalation_is_whole(self) -> Rule:
        if (self.escalate_after_seconds is None) != (not self.escalate_to):
            raise ValueError("set both escalate_after_seconds and escalate_to, or neither")
        return self

    def matches(self, tool: str, agent: str, mcp_server: str | None = None) -> bool:
        """Whether the call's names fall under the rule (its `when` aside)."""
        if self.mcp_server is not None and (
            mcp_server is None or not fnmatch.fnmatchcase(mcp_server, self.mcp_server)
        ):
            return False
        return fnmatch.fnmatchcase(tool, self.tool) and (
            self.agent is None or fnmatch.fnmatchcase(agent, self.agent)
        )


class PolicyFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    rule: tuple[Rule, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Match:
    """The rule a call falls under."""

    index: int | None
    """The first rule that holds for the call, in the policy's rules; None: no rule, the
    environment's defaults."""
    unjudged: tuple[Unjudged, ...] = ()
    """Rules before it whose `when` could not be judged for the call: it must satisfy them too."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    rules: tuple[Rule, ...]
    default_approvers: tuple[str, ...]
    default_ttl_seconds: int
    default_grant_max_seconds: int = 0
    default_external: bool = False
    """`EXTERNAL_DECIDERS=allow`."""
    default_channel: str | None = None
    """`APPROVAL_CHANNEL`: where the cards of runs started in a direct message go."""
    rule_lines: tuple[int, ...] = ()
    """The line of each rule's `[[rule]]` in the policy file, for whoever points at one."""

    @property
    def version(self) -> str:
        """A digest of the rules and defaults: what an Approve always is bound to
        (`runtime.record.permissions`), so a changed policy honours none made before."""
        text = "\n".join(
            [
                # A field added later is left out while unset: Approve always outlives a deploy.
                *(rule.model_dump_json(exclude=_unset(rule)) for rule in self.rules),
                ",".join(self.default_approvers),
                f"{self.default_ttl_seconds},{self.default_grant_max_seconds}",
                str(self.default_external),
                # Written only when set: a deploy without APPROVAL_CHANNEL keeps the version.
                *([f"channel:{self.default_channel}"] if self.default_channel else []),
            ]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def names_a_card_channel(self) -> bool:
        """Whether cards of runs started in a direct message can go anywhere:
        `APPROVAL_CHANNEL`, or a rule's `channel` (a call whose rule names none, without
        `APPROVAL_CHANNEL`, is then refused: `runtime.policy.verdicts`)."""
        return self.default_channel is not None or any(r.channel for r in self.rules)

    def match(self, tool: str, agent: str, mcp_server: str | None = None) -> Match:
        """The rule a call of `tool` falls under, its arguments unknown (a tool's listing): a
        `when` rule cannot be judged, so the call must satisfy it too."""
        unjudged: list[Unjudged] = []
        for number, rule in enumerate(self.rules):
            if not rule.matches(tool, agent, mcp_server):
                continue
            if rule.when is None:
                return Match(index=number, unjudged=tuple(unjudged))
            unjudged.append(Unjudged(rule=rule.label, reason=UNKNOWN_ARGUMENTS, index=number))
        return Match(index=None, unjudged=tuple(unjudged))

    async def judge(self, facts: CallFacts) -> Match:
        """The first rule that holds for the call, each `when` evaluated on `facts` (within
        its budget, off the event loop), and the rules before it that could not be judged. The
        one place a call meets the rules: the processes and the backtest
        (`runtime.review.backtest`) both ask here."""
        unjudged: list[Unjudged] = []
        for number, rule in enumerate(self.rules):
            if not rule.matches(facts.tool, facts.agent, facts.mcp_server):
                continue
            outcome = await rule.holds(facts)
            if outcome.holds is None:
                reason = outcome.reason or "it cannot be evaluated"
                unjudged.append(Unjudged(rule=rule.label, reason=reason, index=number))
            elif outcome.holds:
                return Match(index=number, unjudged=tuple(unjudged))
        return Match(index=None, unjudged=tuple(unjudged))

    async def reviews_output(self, match: Match, facts: CallFacts) -> bool:
        """Whether the call's output is held for a person: the rule it fell under says so, or
        one whose `when` could not be judged (it must satisfy that one too)."""
        indexes = [u.index for u in match.unjudged]
        if match.index is not None:
            indexes.append(match.index)
        for index in indexes:
            if await self.rules[index].reviews_output(facts):
                return True
        return False

    def rule_for(self, tool: str, agent: str, mcp_server: str | None = None) -> CallRule:
        """The rule for a call whose arguments are not known (`match`)."""
        return self.resolve(self.match(tool, agent, mcp_server))

    def resolve(self, match: Match) -> CallRule:
        """The rule a match names, defaults filled in, made stricter by every rule before it
        that could not be judged (`runtime.record.call_rule.stricter`)."""
        resolved = self._typed(self._resolve(match.index))
        for unjudged in reversed(match.unjudged):
            resolved = stricter(self._typed(self._resolve(unjudged.index)), resolved, unjudged)
        return resolved

    @staticmethod
    def _typed(rule: CallRule) -> CallRule:
        if rule.confirm is None:
            return rule
        # Each approval is typed: nothing may stand in for it, nor change what is typed for.
        return replace(rule, allow_always=False, grant_max_seconds=0, allow_edit=False)

    def _resolve(self, index: int | None) -> CallRule:
        rule = None if index is None else self.rules[index]
        if rule is None:
            return CallRule(
                approvers=self.default_approvers,
                quorum=1,
                ttl_seconds=self.default_ttl_seconds,
                allow_always=True,
                auto=None,
                grant_max_seconds=self.default_grant_max_seconds,
                external=self.default_external,
                channel=self.default_channel,
            )
        approvers = self.default_approvers if rule.approvers is None else rule.approvers
        return CallRule(
            approvers=() if rule.anyone else approvers,
            quorum=rule.quorum,
            ttl_seconds=rule.ttl_seconds or self.default_ttl_seconds,
            # "Approve always" would let later calls skip the quorum: off unless asked for.
            allow_always=rule.allow_always if rule.allow_always is not None else rule.quorum == 1,
            auto=rule.auto,
            # A grant would let later calls skip the quorum: never under one.
            grant_max_seconds=0
            if rule.quorum > 1
            else (
                self.default_grant_max_seconds
                if rule.grant_max_seconds is None
                else rule.grant_max_seconds
            ),
            allow_edit=rule.allow_edit,
            answer=rule.answer,
            preview=rule.preview,
            notify=rule.notify,
            escalate_after_seconds=rule.escalate_after_seconds,
            escalate_to=rule.escalate_to,
            external=self.default_external if rule.external is None else rule.external,
            when=rule.when,
            name=rule.name,
            confirm=rule.confirm,
            index=index,
            channel=rule.channel or self.default_channel,
        )


def parse_principals(text: str) -> tuple[str, ...]:
    """`APPROVERS`: comma-separated user and user-group ids."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _unset(rule: Rule) -> set[str]:
    """Fields added since permissions were first bound to the policy's version, left out while
    they keep their defaults: a deploy that adds a field keeps every Approve always."""
    unset = {"elicitation_responders"} if rule.elicitation_responders is None else set()
    unset |= {"answer"} if rule.answer else set()
    unset |= {"review_output"} if not rule.review_output else set()
    unset |= {"channel"} if rule.channel is None else set()
    return unset | ({"review_output_when"} if rule.review_output_when is None else set())
