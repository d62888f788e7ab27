"""An edit moves a call under a stricter rule (a re-gating) while escalations are in play: the
stricter rule's approvers decide, plus whom the stricter rule's own escalation adds, counted from
when the call was asked; whom the looser rule's escalation added, or would add, never decides."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.runtime.deciders.test_approvers import ephemeral_for
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.support import agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.time_passing import pass_time

ADMINS = "args.user_id.startsWith('admin-')"


def policy(*, strict_after: int, loose_after: int) -> str:
    """Admins are carol's, escalated to erin; anyone else bob's, escalated to dave."""
    return f"""
[[rule]]
name = "admins"
tool = "delete_user"
when = "{ADMINS}"
approvers = ["UCAROL"]
escalate_after_seconds = {strict_after}
escalate_to = ["UERIN"]

[[rule]]
tool = "delete_user"
approvers = ["UBOB"]
escalate_after_seconds = {loose_after}
escalate_to = ["UDAVE"]
"""


@pytest.fixture
def env_overrides(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(request.param)
    return {"POLICY_FILE": str(path), "REMINDER_AT": "0"}


def with_policy(text: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("env_overrides", [text], indirect=True, ids=["policy"])


def deleting(user_id: str) -> Callable[[ModelRequest], list[Item]]:
    def script(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": user_id}, "call_del")]
        return [message("done: " + request.tool_outputs["call_del"])]

    return script


async def escalations(bot: Harness, count: int, timeout: float = 10) -> list[list[str]]:
    """Whom each `escalated` audit entry added, once there are `count`."""
    deadline = time.monotonic() + timeout
    while True:
        trail = await bot.audit_until("escalated", timeout)
        found = [e["escalate_to"] for e in trail if e["event"] == "escalated"]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.05)


async def refused(bot: Harness, card_click: Callable[[], object], user: str) -> str:
    before = len([e for e in bot.slack.ephemerals if e["user"] == user])
    await card_click()  # type: ignore[misc]
    await bot.slack.wait_for(
        lambda: len([e for e in bot.slack.ephemerals if e["user"] == user]) > before,
        what=f"a note to {user}",
    )
    return await ephemeral_for(bot, user)


@with_policy(policy(strict_after=120, loose_after=60))
async def test_a_call_that_waited_past_the_stricter_rules_escalation_escalates_under_it_at_once(
    bot: Harness,
) -> None:
    bot.model.script = deleting("u-100")
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await pass_time(bot.redis, bot.keys, card, seconds=60)  # the looser rule's minute
    assert await escalations(bot, 1) == [["UDAVE"]], "the looser rule escalated to dave"
    await pass_time(bot.redis, bot.keys, card, seconds=65)  # past the stricter two minutes

    modal = await open_editor(bot, card, user="UBOB")
    assert await submit(bot, modal, '{"user_id": "admin-7"}', user="UBOB") == {}
    edited = time.monotonic()
    await bot.slack.wait_for(lambda: "Rule: admins" in card.all_text(), what="the new rule")
    assert await escalations(bot, 2) == [["UDAVE"], ["UERIN"]]
    assert time.monotonic() - edited < 2, "at once, not at the next tick of a sleeping poller"
    await bot.slack.wait_for(
        lambda: "Who may decide*\\n<@UCAROL>, <@UERIN>" in card.all_text(),
        what="erin on the card",
    )

    click = lambda: bot.sender.click(card, "approve", user="UDAVE")  # noqa: E731
    assert "Only UCAROL or UERIN may decide" in await refused(bot, click, "UDAVE")
    assert agents.EXECUTIONS == []
    await bot.sender.click(card, "approve", user="UERIN")
    assert (await bot.final_answer(root)).text.endswith("deleted admin-7")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "admin-7"})]


@with_policy(policy(strict_after=4, loose_after=2))
async def test_the_looser_rules_escalation_never_widens_the_stricter_gate(bot: Harness) -> None:
    bot.model.script = deleting("u-100")
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    asked = time.monotonic()
    modal = await open_editor(bot, card, user="UBOB")
    assert await submit(bot, modal, '{"user_id": "admin-7"}', user="UBOB") == {}
    await bot.slack.wait_for(lambda: "Rule: admins" in card.all_text(), what="the new rule")

    # The stricter rule's escalation comes at its time (4 s after the call was asked), and
    # the looser one's (due at 2 s) never.
    assert await escalations(bot, 1) == [["UERIN"]]
    assert time.monotonic() - asked >= 3.5, "not before the stricter rule's time"
    click = lambda: bot.sender.click(card, "approve", user="UDAVE")  # noqa: E731
    assert "Only UCAROL or UERIN may decide" in await refused(bot, click, "UDAVE")
    trail = await bot.audit_until("escalated")
    assert [e["escalate_to"] for e in trail if e["event"] == "escalated"] == [["UERIN"]]
    await bot.sender.click(card, "approve", user="UERIN")
    assert (await bot.final_answer(root)).text.endswith("deleted admin-7")
