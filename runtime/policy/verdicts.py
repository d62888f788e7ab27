"""The one place where a call meets the policy, whatever decides it afterwards.

Every call the SDK interrupts (`runtime.runs.planner`), every edit a person makes
(`runtime.decisions.edits`) and every past call the backtest replays (`runtime.review.backtest`)
is judged here, on the arguments as the tool receives them (`runtime.judging.arguments`):

1. the rules are walked in order and each `when` evaluated within its budget
   (`Policy.judge`); one that cannot be judged makes the call satisfy it and the rule it falls
   under otherwise (`runtime.record.call_rule.stricter`);
2. nothing approves the call by itself (no `auto = "approve"`, no grant, no Approve always) when
   a `when` could not be judged, when its arguments do not fit the tool, or when its run was
   started by a guest or a person of another organisation (`Conversation.requester_external`);
3. a call whose rule (or a rule it may fall under) says `review_output`, or whose
   `review_output_when` holds or cannot be judged, has its output held for a person;
4. the verdict names the rule key an Approve always on the call would bind
   (`runtime.record.permissions`).

What may then stand in for a person (an automatic rule, a permission, a grant) is checked by the
planner against this verdict, call by call, and audited call by call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from runtime.conditions import CallFacts
from runtime.jobs.contracts import Conversation
from runtime.judging.arguments import JudgedArguments
from runtime.policy.rules import Policy
from runtime.record.call_rule import CallRule
from runtime.record.permissions import RuleKey

NO_CARD_CHANNEL = (
    "it was asked for in a direct message with the app and no approvers' channel is set "
    "(set APPROVAL_CHANNEL, or the rule's channel in the policy)"
)
"""Why a call of a run started in a direct message is refused when its card has nowhere to go."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    arguments: JudgedArguments | None
    """None: not known (a past call whose arguments the trail did not keep)."""
    rule: CallRule
    """The rule the call must satisfy, defaults filled in; loosenings already removed where
    nothing may approve it by itself."""
    key: RuleKey | None
    """What an Approve always on this call binds; None when its rule offers none."""


async def judge(
    policy: Policy,
    *,
    tool: str,
    agent: str,
    mcp_server: str | None,
    arguments: JudgedArguments | None,
    conversation: Conversation,
) -> Verdict:
    """The policy's verdict on one call (see the module's docstring); `arguments` None: not
    known, so no `when` can be judged."""
    facts = CallFacts(
        arguments=None if arguments is None else arguments.text,
        tool=tool,
        agent=agent,
        mcp_server=mcp_server,
        channel=conversation.channel,
        requester=conversation.requester,
    )
    match = await policy.judge(facts)
    rule = policy.resolve(match)
    if await policy.reviews_output(match, facts):
        rule = replace(rule, review_output=True)
    if (arguments is not None and not arguments.valid) or conversation.requester_external:
        rule = rule.unloosened
    if conversation.direct and rule.channel is None and rule.auto is None:
        # Its card would be the requester's alone: nobody else could see it, let alone decide.
        rule = replace(rule, auto="reject", refusal=NO_CARD_CHANNEL)
    key = None
    if rule.allow_always:
        key = RuleKey(
            tool=tool, agent=agent, mcp_server=mcp_server, rule=rule.index, policy=policy.version
        )
    return Verdict(arguments=arguments, rule=rule, key=key)
