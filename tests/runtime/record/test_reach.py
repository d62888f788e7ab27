"""Approve from where you are: copies of a card (`notify`) and escalation (`escalate_to`).

All copies are one approval: a decision on any copy is recorded by the same script and redraws
every copy; an escalation lets more people decide, and says so in the thread.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runtime.record import layout as rr
from tests.runtime.deciders.test_approvers import card_for, ephemeral_for
from tests.runtime.grants.test_grants import grant_lines, grant_options, run_in
from tests.support import agents
from tests.support.fake_slack import Message
from tests.support.harness import Harness


@pytest.fixture
def env_overrides(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    policy, environ = request.param
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    return {"POLICY_FILE": str(path), **environ}


def with_policy(policy: str, **environ: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize(
        "env_overrides", [(policy, environ)], indirect=True, ids=["policy"]
    )


NOTIFY = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "S0SRE"]
notify = ["UBOB", "S0SRE", "COPS", "CGENERAL"]
"""


def copy_in(bot: Harness, channel: str) -> Message:
    [copy] = [m for m in bot.slack.copies() if m.channel == channel]
    return copy


async def copies_recorded(bot: Harness, ref: str, count: int) -> None:
    """The worker records the copies once they are posted: a copy is one approval from then."""
    run_id, approval_id = ref.split(":")[:2]
    for _ in range(200):
        raw = await bot.redis.hget(bot.keys.run(run_id), rr.COPIES + approval_id)
        if raw is not None and len(json.loads(raw)) >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the copies were never recorded")


@with_policy(NOTIFY)
async def test_notify_sends_copies_and_a_decision_on_one_redraws_them_all(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL", "UALICE"]}
    root, card = await card_for(bot)
    ref = str(card.actions()[0]["value"])
    copies = await bot.slack.wait_for(
        lambda: bot.slack.copies() if len(bot.slack.copies()) >= 3 else None, what="3 copies"
    )
    # Bob and Carol in direct messages, #ops; not Alice (she asked), not the run's own channel.
    assert sorted(c.channel for c in copies) == ["COPS", "DUBOB", "DUCAROL"]
    for copy in copies:
        assert copy.action_ids() == [
            "approve",
            "approve_note",
            "approve_always",
            "reject",
            "answer",
        ]
        assert "A copy of a request in <#CGENERAL>" in copy.all_text()
        assert copy.actions()[0]["value"] == card.actions()[0]["value"], "one approval"

    await copies_recorded(bot, ref, 3)
    await bot.sender.click(copy_in(bot, "DUCAROL"), "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    everywhere = [card, *copies]
    await bot.slack.wait_for(
        lambda: all("<@UCAROL> approved" in m.all_text() for m in everywhere),
        what="the decision on the card and on every copy",
    )
    assert [m.action_ids() for m in everywhere] == [[]] * 4
    assert len(agents.EXECUTIONS) == 1

    # A late click on another copy (Bob's screen still shows the buttons) records nothing.
    await bot.sender.click(copy_in(bot, "DUBOB"), "approve", user="UBOB", value=ref)
    assert "Nothing was recorded" in await ephemeral_for(bot, "UBOB")
    assert len(agents.EXECUTIONS) == 1


@with_policy(NOTIFY)
async def test_a_click_from_a_channel_without_a_copy_or_on_another_approval_is_refused(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL"]}
    _root, card = await card_for(bot)
    await bot.slack.wait_for(lambda: len(bot.slack.copies()) == 3, what="3 copies")
    elsewhere = Message("CRANDOM", card.ts, card.text, card.blocks, None)
    await bot.sender.click(elsewhere, "approve", user="UBOB")
    assert "not open" in await ephemeral_for(bot, "UBOB")

    run_id = str(card.actions()[0]["value"]).split(":")[0]
    await bot.sender.click(
        copy_in(bot, "DUCAROL"), "approve", user="UCAROL", value=f"{run_id}:a0000000000"
    )
    assert "not open" in await ephemeral_for(bot, "UCAROL")
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "nothing recorded"
    )
    assert agents.EXECUTIONS == []


ESCALATE = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB"]
escalate_after_seconds = 1
escalate_to = ["UCAROL", "S0LEADS"]
"""


@with_policy(ESCALATE, REMINDER_AT="0")
async def test_an_escalation_lets_more_people_decide_and_says_so_in_the_thread(
    bot: Harness,
) -> None:
    bot.slack.groups["S0LEADS"] = {"handle": "leads", "users": ["UDAVE"]}
    root, card = await card_for(bot)
    await bot.sender.click(card, "approve", user="UCAROL")
    assert "Only" in await ephemeral_for(bot, "UCAROL"), "Carol may not decide yet"
    assert 'Who may decide*\\n<@UBOB>"' in card.all_text()

    notes = await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="the escalation")
    assert notes[0].text.startswith(
        ":rotating_light: <@UCAROL> <!subteam^S0LEADS> Escalated: nobody has decided `delete_user`"
    )
    copies = await bot.slack.wait_for(
        lambda: bot.slack.copies() if len(bot.slack.copies()) == 2 else None, what="2 copies"
    )
    assert sorted(c.channel for c in copies) == ["DUCAROL", "DUDAVE"]
    # The card and its copies name everyone who may decide now, not only the rule's approvers.
    await bot.slack.wait_for(
        lambda: all(
            "Who may decide*\\n<@UBOB>, <@UCAROL>, <!subteam^S0LEADS>" in m.all_text()
            for m in (card, *copies)
        ),
        what="the card and copies naming the escalated approvers",
    )
    trail = await bot.audit_until("escalated")
    [escalated] = [e for e in trail if e["event"] == "escalated"]
    assert escalated["escalate_to"] == ["UCAROL", "S0LEADS"]
    assert escalated["tool"] == "delete_user"
    await copies_recorded(bot, str(card.actions()[0]["value"]), 2)
    # So does the Home tab of someone the escalation let decide (through @leads).
    opened = {"type": "app_home_opened", "user": "UDAVE", "channel": "DUDAVE", "tab": "home"}
    assert (await bot.sender.event(opened))[0] == 200
    await bot.slack.wait_for(
        lambda: "`delete_user`" in json.dumps(bot.slack.home_tabs.get("UDAVE", {})),
        what="the call on Dave's Home tab",
    )

    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert "<@UCAROL> approved" in card.all_text()
    await bot.slack.wait_for(
        lambda: all("<@UCAROL> approved" in c.all_text() for c in copies),
        what="the copies redrawn",
    )
    assert len(bot.slack.notes(root.ts)) == 1, "escalated once"


@with_policy(NOTIFY)
async def test_a_grant_chosen_on_a_copy_covers_later_calls_in_the_runs_channel(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL"]}
    bot.slack.channels["CGENERAL"] = "general"
    root, _card = await card_for(bot)
    await bot.slack.wait_for(lambda: len(bot.slack.copies()) >= 3, what="3 copies")
    copy = copy_in(bot, "DUCAROL")
    await copies_recorded(bot, str(copy.actions()[0]["value"]), 3)
    hour = grant_options(copy)["delete_user in #general for 1 hour"]
    await bot.sender.choose_grant(copy, hour, user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"

    # The grant is the run's channel's, not the direct message's: the next run there skips
    # the card (and sends no copies).
    second = await run_in(bot, "delete u-100 again")
    assert (await bot.final_answer(second)).text == "done: deleted u-100"
    [line] = grant_lines(bot, second)
    assert "<@UCAROL>'s grant" in line.text
    assert [c for c in bot.slack.cards() if c.thread_ts == second.ts] == []
    assert len(agents.EXECUTIONS) == 2
