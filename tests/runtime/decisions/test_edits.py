"""Edit, then approve: a person changes a call's arguments in a modal; what runs is exactly what
they approved, bound by its digest, and the model is told what changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.calls.digest import call_digest
from runtime.decisions.edits import NOT_EDITABLE
from runtime.examples.ops import REFUNDS
from tests.bot.blocks.test_card_context import explain_then
from tests.conftest import with_env
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


def edit_button(card: Message) -> dict[str, Any] | None:
    found = [b.get("accessory") for b in card.blocks if b.get("block_id") == "call_arguments"]
    return found[0] if found else None


async def open_editor(bot: Harness, card: Message, *, user: str) -> dict[str, Any]:
    button = edit_button(card)
    assert button is not None, "the card has an Edit button"
    opened = len(bot.slack.views)
    status, _ = await bot.sender.click(card, "edit_arguments", user=user, value=button["value"])
    assert status == 200
    await bot.slack.wait_for(lambda: len(bot.slack.views) > opened, what="edit modal")
    return bot.slack.views[-1]


async def submit(bot: Harness, modal: dict[str, Any], text: str, *, user: str) -> dict[str, Any]:
    values = {"arguments": {"arguments_input": {"type": "plain_text_input", "value": text}}}
    status, body = await bot.sender.submit_view(modal, user=user, values=values)
    assert status == 200
    return json.loads(body) if body.startswith("{") else {}


async def test_an_edited_call_runs_with_the_edited_arguments_and_the_model_is_told(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    modal = await open_editor(bot, card, user="UBOB")
    field = modal["blocks"][1]["element"]
    assert field["initial_value"] == '{\n  "user_id": "u-100"\n}', "pretty JSON, ready to edit"

    edited = '{"user_id": "u-101"}'
    assert await submit(bot, modal, edited, user="UBOB") == {}, "the modal closes"
    answer = await bot.final_answer(root)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-101"})]
    told = bot.model.requests[-1].tool_outputs["call_del"]
    assert told.startswith("Note: before approving, ubob (UBOB) edited the arguments"), told
    assert 'user_id: "u-100" -> "u-101"' in told and told.endswith("deleted u-101")
    assert answer.text.endswith("deleted u-101")

    new_digest = call_digest("delete_user", edited)
    text = card.all_text()
    assert "Edited and approved by <@UBOB>" in text
    assert '`user_id`: `\\"u-100\\"` → `\\"u-101\\"`' in text, text
    assert f"sha256:{new_digest[:16]}" in text
    trail = await bot.audit_until("finished")
    [entry] = [e for e in trail if e["event"] == "edited"]
    assert entry["digest"] == new_digest
    assert entry["previous_digest"] == call_digest("delete_user", '{"user_id": "u-100"}')
    [executed] = [e for e in trail if e["event"] == "executed"]
    assert executed["digest"] == new_digest


async def test_an_invalid_edit_comes_back_in_the_modal_and_records_nothing(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    modal = await open_editor(bot, card, user="UBOB")

    answer = await submit(bot, modal, '{"user_id": ', user="UBOB")
    assert answer["response_action"] == "errors"
    assert answer["errors"]["arguments"].startswith("This is not valid JSON (line 1)")
    # Plain sentences: a modal's error shows no Markdown, and no Python quoting.
    answer = await submit(bot, modal, '{"user": "u-101"}', user="UBOB")
    assert answer["errors"]["arguments"] == "user_id is missing: the tool needs it."
    answer = await submit(bot, modal, '{"user_id": 7}', user="UBOB")
    assert answer["errors"]["arguments"] == "user_id must be text in quotes, not 7."
    answer = await submit(bot, modal, '{"user_id": "u-1", "user_idd": "u-2"}', user="UBOB")
    assert answer["errors"]["arguments"] == (
        "The tool has no argument user_idd. Did you mean user_id?"
    )

    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    fields: Any = await bot.redis.hkeys(bot.keys.run(run_id))
    assert {f.decode() for f in fields} >= {f"gate:{approval_id}"}
    assert not {f.decode() for f in fields} & {f"decision:{approval_id}", f"edit:{approval_id}"}
    trail = [e[b"event"] for e in await bot.entries(bot.keys.audit)]
    assert b"edited" not in trail and b"approved" not in trail
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "still open"
    )

    # Still decidable as it was.
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


QUORUM = """
[[rule]]
tool = "delete_*"
quorum = 2
"""


async def test_an_edit_under_a_quorum_restarts_the_count_on_the_new_arguments(
    bot: Harness, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(QUORUM)
    await bot.stop_workers()
    await bot.start_worker(POLICY_FILE=str(path))
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    stale = await open_editor(bot, card, user="UDAVE")  # opened before anyone edits

    await bot.sender.click(card, "approve", user="UBOB")
    await bot.slack.wait_for(
        lambda: (
            "1 of 2 approvals: <@UBOB> approved; anyone else in the channel can" in card.all_text()
        )
    )
    modal = await open_editor(bot, card, user="UCAROL")
    assert await submit(bot, modal, '{"user_id": "u-102"}', user="UCAROL") == {}
    await bot.slack.wait_for(
        lambda: (
            "1 of 2 approvals: <@UCAROL> approved; anyone else in the channel" in card.all_text()
        ),
        what="count restarted",
    )
    assert "Edited by <@UCAROL>; approvals count from this edit" in card.all_text()
    assert '\\"u-102\\"' in card.all_text(), "the card shows the edited arguments"

    # An edit of what is no longer there is refused.
    await submit(bot, stale, '{"user_id": "u-999"}', user="UDAVE")
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UDAVE"], what="note"
    )
    assert str(notes[-1]["text"]).startswith("Someone changed these arguments")

    await bot.sender.click(card, "approve", user="UBOB")  # Bob approves the edited call
    await bot.final_answer(root)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-102"})]


NO_EDITS = """
[[rule]]
tool = "delete_*"
allow_edit = false
"""


async def test_allow_edit_false_hides_edit_and_the_script_refuses_one(
    bot: Harness, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(NO_EDITS)
    await bot.stop_workers()
    await bot.start_worker(POLICY_FILE=str(path))
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert edit_button(card) is None
    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    # A hand-made submission, as if a modal had been opened.
    original = call_digest("delete_user", '{"user_id": "u-100"}')
    meta = {"run_id": run_id, "approval_id": approval_id, "channel": "CGENERAL"}
    modal = {
        "callback_id": "edit_arguments",
        "private_metadata": json.dumps({**meta, "digest": original}),
    }
    await submit(bot, modal, '{"user_id": "u-101"}', user="UBOB")
    notes = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="note")
    assert notes[-1]["text"] == "Editing is not allowed for this call, so nothing was recorded."
    assert await bot.redis.hget(bot.keys.run(run_id), f"decision:{approval_id}") is None
    assert agents.EXECUTIONS == []


async def test_the_requester_cannot_edit_their_own_call(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")  # asked by UALICE
    [card] = await bot.cards(root, 1)
    button = edit_button(card)
    assert button is not None
    await bot.sender.click(card, "edit_arguments", user="UALICE", value=button["value"])
    notes = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="note")
    assert str(notes[-1]["text"]).startswith("You asked for this,")
    assert bot.slack.views == []


async def test_edited_arguments_changed_after_approval_do_not_run(bot: Harness) -> None:
    """The approval binds the edited arguments' digest: text swapped in afterwards is refused."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.stop_workers()  # the resume waits until the tampering is done
    modal = await open_editor(bot, card, user="UBOB")
    await submit(bot, modal, '{"user_id": "u-101"}', user="UBOB")
    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    key, field = bot.keys.run(run_id), f"decision:{approval_id}"
    await bot.slack.wait_for(lambda: "Edited and approved" in card.all_text(), what="decided")
    decision = json.loads(await bot.field(key, field))
    decision["edit"]["arguments"] = '{"user_id": "u-999"}'
    await bot.redis.hset(key, field, json.dumps(decision))

    await bot.start_worker()
    await bot.final_answer(root)
    assert agents.EXECUTIONS == []
    trail = await bot.audit_until("refused")
    [refused] = [e for e in trail if e["event"] == "refused"]
    assert refused["tool"] == "delete_user"


@pytest.mark.usefixtures("pretend_world")
@with_env(AGENTS="runtime.examples:AGENTS")
async def test_an_edited_call_is_previewed_again_before_it_runs(bot: Harness) -> None:
    """The card's preview was made for the model's amount; the edited amount is previewed just
    before the refund runs, on the card and in the thread, and the refund runs once."""
    order = {"order_id": "o-5521", "amount_cents": 1200}
    bot.model.script = explain_then("refund_order", order, None)
    root = await bot.start_run("billing: refund 12.00 on o-5521")
    [card] = await bot.cards(root, 1)
    assert "Would refund 12.00 of 48.00" in card.all_text()
    modal = await open_editor(bot, card, user="UBOB")

    edited = '{"order_id": "o-5521", "amount_cents": 900}'
    assert await submit(bot, modal, edited, user="UBOB") == {}
    answer = await bot.final_answer(root)
    assert answer.text == "done"
    preview = "Would refund 9.00 of 48.00 to Grace Hopper's Visa ending 4242, leaving 39.00 paid."
    [line] = [m for m in bot.slack.notes(root.ts) if m.text.startswith(":eyes:")]
    said = ":eyes: `refund_order` runs now with the arguments <@UBOB> edited. Their preview: "
    assert line.text == said + preview
    assert line.ts < answer.ts, "shown before the refund ran"
    await bot.slack.wait_for(
        lambda: f"*Preview of the edited call*\\n{preview}" in card.all_text(), what="card"
    )
    assert "Would refund 12.00" not in card.all_text()

    told = bot.model.requests[-1].tool_outputs["call_1"]
    assert told.endswith("Refunded 9.00 on order o-5521 (refund rf-0001)."), told
    assert len(REFUNDS) == 1
    trail = await bot.audit_until("finished")
    [entry] = [e for e in trail if e["event"] == "edited"]
    assert entry["digest"] == call_digest("refund_order", edited)
    assert [e["tool"] for e in trail if e["event"] == "executed"] == ["refund_order"]


def tune_then_answer(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [tool_call("tune", {"level": 3}, "call_tune")]
    return [message("tuned")]


@with_env(AGENTS="tests.support.schema_agents:REGISTRY")
async def test_a_tool_whose_schema_is_invalid_cannot_be_edited_and_nothing_escapes(
    bot: Harness,
) -> None:
    bot.model.script = tune_then_answer
    root = await bot.start_run("tune it")
    [card] = await bot.cards(root, 1)
    assert edit_button(card) is None
    assert "This tool's arguments cannot be edited: its schema is invalid" in card.all_text()

    # A submission all the same (a card drawn before, a hand-made payload): refused in the
    # modal, in words, and nothing recorded; the listener does not fail.
    run_id, approval_id, digest = str(card.actions()[0]["value"]).split(":")
    metadata = {"run_id": run_id, "approval_id": approval_id, "channel": card.channel}
    modal = {
        "callback_id": "edit_arguments",
        "private_metadata": json.dumps({**metadata, "digest": digest}),
    }
    answer = await submit(bot, modal, '{"level": 5}', user="UBOB")
    assert answer == {"response_action": "errors", "errors": {"arguments": NOT_EDITABLE}}
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "still open"
    )

    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    assert agents.EXECUTIONS == [("tune", {"level": 3})]
