"""Reminders: one at each `REMINDER_AT` fraction, mentioning only people who may decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.settings import SettingsError, load_settings
from runtime.policy import PolicyError, load_policy
from runtime.settings import RuntimeSettings
from tests.conftest import with_env
from tests.runtime.deciders.test_approvers import card_for
from tests.support.harness import Harness
from tests.support.time_passing import pass_time


@with_env(APPROVAL_TTL_SECONDS="600", REMINDER_AT="0.6,0.3", APPROVERS="UBOB")
async def test_a_list_of_fractions_sends_a_reminder_at_each(bot: Harness) -> None:
    root, card = await card_for(bot)
    await pass_time(bot.redis, bot.keys, card, seconds=180)  # 0.3 of the 600 s
    await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="the first reminder")
    await pass_time(bot.redis, bot.keys, card, seconds=180)  # 0.6
    reminders = await bot.slack.wait_for(
        lambda: bot.slack.notes(root.ts) if len(bot.slack.notes(root.ts)) == 2 else None,
        what="two reminders",
    )
    assert [r.text.split(" Reminder:")[0] for r in reminders] == [":alarm_clock: <@UBOB>"] * 2
    await pass_time(bot.redis, bot.keys, card, seconds=240)
    await bot.final_answer(root)  # then it expires
    assert len(bot.slack.notes(root.ts)) == 2, "no third"
    # Expired: the reminders no longer say it waits.
    settled = (
        ":alarm_clock: No longer waiting: `delete_user` expired: nobody decided in time (above)."
    )
    await bot.slack.wait_for(
        lambda: all(r.text == settled for r in reminders), what="reminders redrawn"
    )


@with_env(APPROVAL_TTL_SECONDS="600", REMINDER_AT="0.1", APPROVERS="UBOB")
async def test_a_decided_call_s_reminder_no_longer_says_it_waits(bot: Harness) -> None:
    root, card = await card_for(bot)
    await pass_time(bot.redis, bot.keys, card, seconds=60)
    [reminder] = await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="a reminder")
    await bot.sender.reject(card, user="UBOB", reason="not now")
    await bot.final_answer(root)
    await bot.slack.wait_for(
        lambda: (
            reminder.text == ":alarm_clock: No longer waiting: `delete_user` was rejected (above)."
        ),
        what="the reminder redrawn",
    )


@with_env(APPROVAL_TTL_SECONDS="600", REMINDER_AT="0.5")
async def test_when_anyone_may_decide_the_reminder_does_not_ping_the_requester(
    bot: Harness,
) -> None:
    root, card = await card_for(bot)
    await pass_time(bot.redis, bot.keys, card, seconds=300)
    [reminder] = await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="a reminder")
    assert reminder.text.startswith(":alarm_clock: Reminder: *ops* still waits")
    assert "anyone here but the requester may decide" in reminder.text
    assert "<@" not in reminder.text


@with_env(APPROVAL_TTL_SECONDS="600", REMINDER_AT="0.5", APPROVERS="UALICE,UBOB")
async def test_a_requester_listed_as_approver_is_not_reminded_of_their_own_run(
    bot: Harness,
) -> None:
    root, card = await card_for(bot)
    await pass_time(bot.redis, bot.keys, card, seconds=300)
    [reminder] = await bot.slack.wait_for(lambda: bot.slack.notes(root.ts), what="a reminder")
    assert reminder.text.startswith(":alarm_clock: <@UBOB> Reminder:")


@pytest.mark.parametrize(
    ("value", "fractions"), [("0.5", (0.5,)), ("0.9, 0.5", (0.5, 0.9)), ("0", ())]
)
def test_reminder_at_reads_a_comma_separated_list(value: str, fractions: tuple[float]) -> None:
    assert RuntimeSettings.from_environ({"REMINDER_AT": value}).reminder_at == fractions


def test_a_fraction_out_of_range_names_the_variable_and_the_fix() -> None:
    with pytest.raises(SettingsError) as error:
        load_settings(
            {"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "y", "REMINDER_AT": "0.5,1"}
        )
    assert "REMINDER_AT is invalid" in str(error.value)
    assert "0.5,0.9 reminds at half time" in str(error.value)


def test_a_rule_reads_notify_and_escalation(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[[rule]]\ntool = "delete_*"\nnotify = ["U0LEAD", "C0OPS"]\n'
        'escalate_after_seconds = 600\nescalate_to = ["S0ONCALL"]\n'
    )
    rule = load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(path)})).rule_for(
        "delete_user", "ops"
    )
    assert (rule.notify, rule.escalate_after_seconds, rule.escalate_to) == (
        ("U0LEAD", "C0OPS"),
        600,
        ("S0ONCALL",),
    )


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('notify = ["#ops"]', "line 3: '#ops' is not a Slack user (U…, W…), user-group (S…) or"),
        ("escalate_after_seconds = 60", "line 1: rule 1: set both"),
        ('escalate_to = ["U0LEAD"]', "set both escalate_after_seconds and escalate_to"),
    ],
)
def test_a_wrong_notify_or_half_an_escalation_names_the_line(
    tmp_path: Path, body: str, problem: str
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(f'[[rule]]\ntool = "delete_*"\n{body}\n')
    with pytest.raises(PolicyError) as error:
        load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(path)}))
    assert problem in str(error.value)
