"""Where the cards of a run started in a direct message go: a rule's `channel`, else
`APPROVAL_CHANNEL`; with neither, no card, and the call is refused (nobody else could see it)."""

from __future__ import annotations

from runtime.jobs.contracts import Conversation
from runtime.policy import Policy, Rule
from runtime.policy.verdicts import NO_CARD_CHANNEL, judge

DIRECT = Conversation(channel="DUALICE", requester="UALICE", direct=True)
CHANNEL = Conversation(channel="CGENERAL", requester="UALICE")


def policy(*rules: dict[str, object], default_channel: str | None = None) -> Policy:
    return Policy(
        rules=tuple(Rule.model_validate(rule) for rule in rules),
        default_approvers=("UBOB",),
        default_ttl_seconds=60,
        default_channel=default_channel,
    )


async def test_a_rules_channel_wins_over_approval_channel_and_either_names_a_channel() -> None:
    found = policy(
        {"tool": "delete_*", "channel": "CDB"}, {"tool": "*"}, default_channel="CAPPROVALS"
    )
    assert found.rule_for("delete_user", "ops").channel == "CDB"
    assert found.rule_for("restart", "ops").channel == "CAPPROVALS"
    assert found.names_a_card_channel
    assert policy({"tool": "x", "channel": "CDB"}).names_a_card_channel
    assert not policy({"tool": "x"}).names_a_card_channel


async def test_a_direct_call_with_nowhere_to_ask_is_refused_and_a_channels_run_untouched() -> None:
    only_rule = policy({"tool": "delete_*", "channel": "CDB"})
    asked = await judge(
        only_rule,
        tool="delete_user",
        agent="ops",
        mcp_server=None,
        arguments=None,
        conversation=DIRECT,
    )
    assert (asked.rule.auto, asked.rule.channel) == (None, "CDB")
    nowhere = await judge(
        only_rule,
        tool="restart",
        agent="ops",
        mcp_server=None,
        arguments=None,
        conversation=DIRECT,
    )
    assert (nowhere.rule.auto, nowhere.rule.refusal) == ("reject", NO_CARD_CHANNEL)
    in_channel = await judge(
        only_rule,
        tool="restart",
        agent="ops",
        mcp_server=None,
        arguments=None,
        conversation=CHANNEL,
    )
    assert (in_channel.rule.auto, in_channel.rule.refusal) == (None, None)


def test_the_version_changes_only_once_a_channel_is_set() -> None:
    plain = policy({"tool": "a"})
    assert policy({"tool": "a", "channel": None}).version == plain.version
    assert policy({"tool": "a", "channel": "CDB"}).version != plain.version
    assert policy({"tool": "a"}, default_channel="CAPPROVALS").version != plain.version
