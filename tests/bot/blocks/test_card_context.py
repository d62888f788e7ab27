"""What a card shows beyond the arguments: the task, why the model asked, and a preview of the
call's effect (shown, failing, slow)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import with_env
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


def explain_then(tool: str, arguments: dict[str, Any], why: str | None) -> Any:
    """Say `why` (if any), call `tool`; once told the outcome, answer `done`."""

    def script(request: ModelRequest) -> list[dict[str, object]]:
        if request.tool_outputs:
            return [message("done")]
        items = [message(why)] if why else []
        return [*items, tool_call(tool, arguments, "call_1")]

    return script


async def test_the_card_shows_the_task_and_why_the_model_asks(bot: Harness) -> None:
    bot.model.script = explain_then(
        "delete_user", {"user_id": "u-100"}, "u-100 left the company last week, so I'll delete it."
    )
    task = "clean up accounts of people who left " + "and more " * 40
    root = await bot.start_run(task)
    [card] = await bot.cards(root, 1)
    text = card.all_text()
    assert f"*Task:* {task[:199]}…" in text, "a long task is shortened"
    assert "*Why:*\\n>u-100 left the company last week, so I'll delete it." in text


async def test_no_why_when_the_model_said_nothing_first(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert "*Task:* delete u-100" in card.all_text()
    assert "*Why:*" not in card.all_text()
    assert "*Preview*" not in card.all_text(), "this tool declares no preview"


@pytest.mark.usefixtures("pretend_world")
@with_env(AGENTS="runtime.examples:AGENTS")
async def test_the_example_tools_preview_what_they_would_do(bot: Harness) -> None:
    bot.model.script = explain_then("delete_user", {"user_id": "u-100"}, None)
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert (
        "*Preview*\\nWould permanently delete Ada Lovelace (u-100, active): the account"
    ) in card.all_text()

    bot.model.script = explain_then("restart_service", {"service": "api"}, None)
    root = await bot.start_run("restart the api")
    [card] = await bot.cards(root, 1)
    assert "Would restart 3 instances of api: api-1, api-2, api-3" in card.all_text()

    bot.model.script = explain_then(
        "refund_order", {"order_id": "o-5521", "amount_cents": 1200}, None
    )
    root = await bot.start_run("billing: refund 12.00 on o-5521")
    [card] = await bot.cards(root, 1)
    assert (
        "Would refund 12.00 of 48.00 to Grace Hopper's Visa ending 4242, leaving 36.00 paid."
    ) in card.all_text()


@with_env(AGENTS="tests.support.preview_agents:REGISTRY")
@pytest.mark.parametrize("user_id", ["u-broken", "u-slow"], ids=["failing", "slow"])
async def test_a_preview_that_fails_or_is_slow_shows_no_preview(bot: Harness, user_id: str) -> None:
    bot.model.script = explain_then("delete_user", {"user_id": user_id}, None)
    started = time.monotonic()
    root = await bot.start_run(f"delete {user_id}")
    [card] = await bot.cards(root, 1)
    assert time.monotonic() - started < 6, "the card is not held back past the preview's 3 s"
    assert "*Preview*\\n_no preview_" in card.all_text()
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    assert [("delete_user", {"user_id": user_id})] == agents.EXECUTIONS


@with_env(AGENTS="tests.support.preview_agents:REGISTRY")
async def test_a_working_preview_is_shown(bot: Harness) -> None:
    bot.model.script = explain_then("delete_user", {"user_id": "u-100"}, None)
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert "*Preview*\\nWould delete u-100 (Ada Lovelace) and 3 projects." in card.all_text()


def test_an_edited_call_does_not_show_the_preview_made_for_the_models_arguments() -> None:
    from bot.blocks.call_context import preview_blocks
    from runtime.record.choices import ArgumentEdit
    from runtime.record.envelope import PendingCall

    call = PendingCall(
        approval_id="a0123456789",
        call_id="call_1",
        tool="refund_order",
        agent="billing",
        arguments='{"order_id": "o-5521", "amount_cents": 1200}',
        expires_at=1_800_000_000.0,
        preview="Would refund 12.00 of 48.00",
    )
    [shown] = [block.to_dict() for block in preview_blocks(call)]
    assert "Would refund 12.00" in shown["text"]["text"]
    edit = ArgumentEdit(
        arguments='{"order_id": "o-5521", "amount_cents": 900}',
        digest="d" * 64,
        previous_digest="c" * 64,
        user_id="UBOB",
        at=1.0,
    )
    [edited] = [block.to_dict() for block in preview_blocks(call.model_copy(update={"edit": edit}))]
    assert "12.00" not in edited["text"]["text"]
    assert "made for the arguments before the edit" in edited["text"]["text"]


def test_the_example_refund_schema_refuses_what_the_tool_should_never_get() -> None:
    from runtime.decisions.edits import InvalidEdit, parse_edit
    from runtime.examples.ops import refund_order

    schema = refund_order.params_json_schema
    assert schema["properties"]["amount_cents"]["minimum"] == 1
    with pytest.raises(InvalidEdit, match="amount_cents must be at least 1, not -500"):
        parse_edit('{"order_id": "o-5521", "amount_cents": -500}', schema)
    parse_edit('{"order_id": "o-5521", "amount_cents": 900}', schema)
