"""Typed confirmations (issue 20 item 1): a rule's `confirm = "name"` makes whoever approves
type that argument's value in a modal; the decision script compares it with the arguments its
digest binds, so a wrong value, or an approval that types nothing, records nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.runtime.deciders.test_approvers import ephemeral_for
from tests.support import agents
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer

POLICY = """
[[rule]]
tool = "delete_user"
confirm = "user_id"
"""


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


async def open_confirmation(bot: Harness, card: Message, *, user: str) -> dict[str, Any]:
    opened = len(bot.slack.views)
    status, _ = await bot.sender.click(card, "approve_typed", user=user)
    assert status == 200
    await bot.slack.wait_for(lambda: len(bot.slack.views) > opened, what="confirmation modal")
    return bot.slack.views[-1]


async def typed(bot: Harness, modal: dict[str, Any], text: str, *, user: str) -> dict[str, Any]:
    values = {"confirm": {"confirm_input": {"type": "plain_text_input", "value": text}}}
    status, body = await bot.sender.submit_view(modal, user=user, values=values)
    assert status == 200
    return json.loads(body) if body.startswith("{") else {}


async def test_a_typed_confirmation_refuses_a_wrong_value_and_approves_the_right_one(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert card.action_ids() == ["approve_typed", "reject", "answer"], (
        "no Approve always, no grants"
    )
    modal = await open_confirmation(bot, card, user="UBOB")
    assert "Type the user_id to approve" in json.dumps(modal)

    answer = await typed(bot, modal, "u-101", user="UBOB")
    assert answer["response_action"] == "errors"
    assert answer["errors"]["confirm"] == (
        "That is not this call's user_id. Nothing was recorded: type it exactly as shown."
    )
    trail = [e[b"event"] for e in await bot.entries(bot.keys.audit)]
    assert b"approved" not in trail
    assert agents.EXECUTIONS == [] and card.action_ids() == ["approve_typed", "reject", "answer"]

    assert await typed(bot, modal, "u-100", user="UBOB") == {}, "the modal closes"
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


async def test_an_approval_that_types_nothing_is_refused_by_the_script(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    value = str(card.actions()[0]["value"])
    # A plain Approve for the same call (a Home tab button, an old card) types nothing.
    await bot.sender.click(card, "approve", user="UBOB", value=value)
    assert "needs its value typed" in await ephemeral_for(bot, "UBOB")
    trail = [e[b"event"] for e in await bot.entries(bot.keys.audit)]
    assert b"approved" not in trail and agents.EXECUTIONS == []
