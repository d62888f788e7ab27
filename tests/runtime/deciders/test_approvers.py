"""Who may decide: approver lists, user groups, self-approval, quorum, policy rules."""

from __future__ import annotations

import pytest

from tests.conftest import on_cluster_too, with_env
from tests.support import agents
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.time_passing import asked_by, pass_time, reminders_come_due


async def card_for(bot: Harness, task: str = "delete u-100") -> tuple[Message, Message]:
    bot.model.script = delete_then_answer
    root = await bot.start_run(task)
    [card] = await bot.cards(root, 1)
    return root, card


async def ephemeral_for(bot: Harness, user: str) -> str:
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == user], what=f"note to {user}"
    )
    return str(notes[-1]["text"])


@on_cluster_too
@with_env(APPROVERS="UBOB,S0SRE")
async def test_only_listed_users_and_group_members_may_decide(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL"]}
    bot.slack.users["UBOB"] = "Bob Builder"
    root, card = await card_for(bot)
    assert "<@UBOB>, <!subteam^S0SRE>" in card.all_text(), "the card mentions who may decide"

    await bot.sender.click(card, "approve", user="UEVE")
    note = await ephemeral_for(bot, "UEVE")
    assert note == "Only Bob Builder or @sre may decide `delete_user`, so nothing was recorded."
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    await bot.sender.click(card, "approve", user="UCAROL")  # a member of @sre
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    trail = await bot.audit_until("finished")
    [denied] = [e for e in trail if e["event"] == "denied"]
    assert (denied["user_id"], denied["reason"], denied["tool"]) == (
        "UEVE",
        "not_an_approver",
        "delete_user",
    )


@with_env(APPROVERS="S0SRE")
async def test_a_change_of_group_membership_takes_effect(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UCAROL"]}
    root, card = await card_for(bot)
    await bot.sender.click(card, "approve", user="UDAVE")
    assert "Only @sre may decide" in await ephemeral_for(bot, "UDAVE")

    bot.slack.groups["S0SRE"]["users"].append("UDAVE")
    status, _ = await bot.sender.event(
        {
            "type": "subteam_members_changed",
            "subteam_id": "S0SRE",
            "team_id": "T0001",
            "added_users": ["UDAVE"],
            "added_users_count": "1",
        }
    )
    assert status == 200
    await bot.sender.click(card, "approve", user="UDAVE")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    lookups = bot.slack.calls_to("usergroups.users.list")
    assert len(lookups) == 2, "cached between clicks, asked again after the event"


@with_env(APPROVERS="UALICE,UBOB")
async def test_the_requester_may_not_approve_their_own_run_but_may_reject_it(
    bot: Harness,
) -> None:
    bot.slack.users.update({"UALICE": "Alice", "UBOB": "Bob"})
    root, card = await card_for(bot)
    assert "*Who may decide*\\n<@UBOB>\\n<@UALICE> (who asked) may only withdraw it" in (
        card.all_text()
    ), "only those who may approve; the requester may still reject"
    await bot.sender.click(card, "approve", user="UALICE")
    assert await ephemeral_for(bot, "UALICE") == (
        "You asked for this, so someone else has to approve it; you may still reject it. "
        "Nothing was recorded."
    )
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    # Stopping your own agent must always be possible.
    await bot.sender.reject(card, user="UALICE", reason="wrong user")
    answer = await bot.final_answer(root)
    assert "rejected" in answer.text
    assert agents.EXECUTIONS == []


@with_env(ALLOW_SELF_APPROVAL="true", APPROVERS="UALICE,UBOB")
async def test_self_approval_can_be_allowed(bot: Harness) -> None:
    root, card = await card_for(bot)
    assert "*Who may decide*\\n<@UALICE>, <@UBOB>" in card.all_text(), "the requester may approve"
    await bot.sender.click(card, "approve", user="UALICE")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


@pytest.mark.parametrize(
    "env_overrides",
    [{"APPROVAL_TTL_SECONDS": "600", "REMINDER_AT": "0.5", "APPROVERS": "S0SRE"}],
    indirect=True,
    ids=["env"],
)
async def test_one_reminder_mentions_the_approver_group(bot: Harness) -> None:
    root, card = await card_for(bot)
    await pass_time(bot.redis, bot.keys, card, seconds=300)
    reminders = await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="reminder")
    assert reminders[0].text.startswith(":alarm_clock: <!subteam^S0SRE> Reminder: *ops* still")
    await pass_time(bot.redis, bot.keys, card, seconds=300)
    await bot.final_answer(root, timeout=10)  # it then expires
    assert len(bot.slack.notes(root.ts)) == 1


@with_env(REMINDER_AT="0.5", APPROVAL_TTL_SECONDS="600")
async def test_no_reminder_once_decided(bot: Harness) -> None:
    root, card = await card_for(bot)
    run_id, _ = asked_by(card)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    await reminders_come_due(bot.redis, bot.keys, run_id)  # the 300 s reminder
    assert bot.slack.notes(root.ts) == []
