"""More than yes or no (issue 35): **Answer instead**, where a person's answer stands in for the
tool's output and the tool never runs, and **Approve with a note…**, where the model reads the
approvers' notes after the output. Both are decisions like any other: the decision script checks
who may decide, the digest the person saw, and that the call is still open; the trail keeps them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.bot.home.test_home_tab import home_buttons, open_home
from tests.conftest import with_env
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.runtime.review.test_backtest import lines, policy
from tests.support import agents
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer

ANSWER = "Ada left last week; her account is already gone, nothing to delete."
NOTE = "only this once; ask the on-call next time"
QUESTION = "What should the agent read as this call's result?"

QUORUM = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "UCAROL"]
quorum = 2
"""

NO_ANSWERS = """
[[rule]]
tool = "delete_*"
answer = false
"""


async def waiting(bot: Harness) -> tuple[Message, Message]:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    return root, card


async def note_to(bot: Harness, user: str) -> str:
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == user], what=f"note to {user}"
    )
    return str(notes[-1]["text"])


async def forged(bot: Harness, card: Message, user: str, callback: str, text: str) -> None:
    """A submission of the answer or note modal that the web app never opened for `user`
    (the Reject modal, which they may open, sent back as the other): only the decision
    script stands in its way."""
    view = await bot.sender.open_modal(card, "reject", user=user)
    await bot.sender.submit_text({**view, "callback_id": callback}, user=user, text=text)


def told(bot: Harness) -> str:
    """What the model read as the call's result, once the run went on."""
    return str(bot.model.requests[-1].tool_outputs["call_del"])


def events(trail: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in trail if e["event"] == name]


# --- Answer instead ---------------------------------------------------------------------------


async def test_an_answer_is_what_the_model_reads_and_the_tool_never_runs(
    bot: Harness, tmp_path: Path
) -> None:
    root, card = await waiting(bot)
    assert "Answer instead" in json.dumps(card.actions())
    modal = await bot.sender.open_modal(card, "answer", user="UCAROL")
    assert QUESTION in json.dumps(modal)
    status, _ = await bot.sender.submit_text(modal, user="UCAROL", text=ANSWER)
    assert status == 200

    answer = await bot.final_answer(root)
    assert told(bot) == f"@ucarol answered instead of running `delete_user`: {ANSWER}"
    assert answer.text.startswith("done: @ucarol answered instead")
    assert agents.EXECUTIONS == [], "the tool never ran"
    assert f"💬 <@UCAROL> answered instead: {ANSWER}" in card.all_text()
    assert card.actions() == []

    trail = await bot.audit_until("finished")
    [asked], [answered] = events(trail, "requested"), events(trail, "answered")
    assert answered["user_id"] == "UCAROL" and answered["tool"] == "delete_user"
    assert answered["digest"] == asked["digest"], "bound to the call the card showed"
    assert answered["answer"] == ANSWER, "AUDIT_ARGS=on keeps the text"
    assert not events(trail, "executed") and not events(trail, "rejected")

    # `/agent stats` and the backtest count it as its own outcome.
    _, body = await bot.sender.command("stats")
    inside = body["text"].split("```")[1]
    rows = {line.split()[0]: line.split() for line in inside.splitlines()}
    assert rows["tool"][2:5] == ["approved", "rejected", "answered"]
    assert rows["delete_user"][1:5] == ["1", "0", "0", "1"], body["text"]
    [past] = lines(policy(bot, tmp_path / "proposal.toml", "backtest", "--json"))
    assert (past["was"], past["decided_by"]) == ("answered", ["UCAROL"])


@with_env(AUDIT_ARGS="off")
async def test_with_audit_args_off_the_trail_keeps_the_digest_not_the_answer(
    bot: Harness,
) -> None:
    root, card = await waiting(bot)
    await bot.sender.answer(card, user="UCAROL", text=ANSWER)
    await bot.final_answer(root)
    assert told(bot).endswith(ANSWER), "the model still reads it"
    [answered] = events(await bot.audit_until("answered"), "answered")
    assert answered["digest"] and "answer" not in answered


@with_env(APPROVERS="UBOB")
async def test_an_answer_by_someone_who_may_not_decide_is_refused_privately(
    bot: Harness,
) -> None:
    root, card = await waiting(bot)
    # Eve's click opens nothing: the same checks as a decision.
    views = len(bot.slack.views)
    await bot.sender.click(card, "answer", user="UEVE")
    assert "may decide `delete_user`, so nothing was recorded" in await note_to(bot, "UEVE")
    assert len(bot.slack.views) == views
    # A modal Bob opened, submitted as Eve: the decision script refuses it too.
    modal = await bot.sender.open_modal(card, "answer", user="UBOB")
    bot.slack.ephemerals.clear()
    await bot.sender.submit_text(modal, user="UEVE", text="it is fine, really")
    assert "nothing was recorded" in await note_to(bot, "UEVE")
    trail = await bot.audit_until("denied")
    assert not events(trail, "answered")
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    await bot.sender.answer(card, user="UBOB", text=ANSWER)
    await bot.final_answer(root)
    assert told(bot).startswith("@ubob answered instead") and agents.EXECUTIONS == []


async def test_the_requester_may_withdraw_their_call_but_not_answer_for_the_tool(
    bot: Harness,
) -> None:
    root, card = await waiting(bot)
    views = len(bot.slack.views)
    await bot.sender.click(card, "answer", user="UALICE")
    assert (await note_to(bot, "UALICE")).startswith("You asked for this")
    assert len(bot.slack.views) == views, "told before any modal"
    bot.slack.ephemerals.clear()
    await forged(bot, card, "UALICE", "answer_instead", "trust me, it is done")
    assert (await note_to(bot, "UALICE")).startswith("You asked for this")
    trail = await bot.audit_until("denied")
    assert [e["reason"] for e in events(trail, "denied")] == ["self_approval"]
    assert not events(trail, "answered") and len(bot.model.requests) == 1
    await bot.sender.answer(card, user="UBOB", text=ANSWER)
    await bot.final_answer(root)
    assert told(bot).startswith("@ubob answered instead") and agents.EXECUTIONS == []


@with_env(POLICY=QUORUM)
async def test_an_answer_to_a_call_that_changed_since_is_refused(bot: Harness) -> None:
    root, card = await waiting(bot)
    opened = await bot.sender.open_modal(card, "answer", user="UBOB")
    # Carol edits the call (and approves the edit, the first of two) before Bob submits.
    editor = await open_editor(bot, card, user="UCAROL")
    assert await submit(bot, editor, '{"user_id": "u-999"}', user="UCAROL") == {}
    await bot.slack.wait_for(lambda: "u-999" in card.all_text(), what="the edited card")
    await bot.sender.submit_text(opened, user="UBOB", text=ANSWER)
    assert "This call changed since your screen showed it" in await note_to(bot, "UBOB")
    trail = await bot.audit_until("edited")
    assert not events(trail, "answered")

    # On the card as it stands now, the answer counts.
    await bot.sender.answer(card, user="UBOB", text=ANSWER)
    await bot.final_answer(root)
    assert told(bot) == f"@ubob answered instead of running `delete_user`: {ANSWER}"
    assert agents.EXECUTIONS == []


@with_env(POLICY=NO_ANSWERS)
async def test_a_rule_with_answer_false_offers_no_answer_and_the_script_refuses_one(
    bot: Harness,
) -> None:
    root, card = await waiting(bot)
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject"]
    # A hand-made click, with the card's own value: refused before any modal.
    views = len(bot.slack.views)
    await bot.sender.click(card, "answer", user="UBOB", value=str(card.actions()[0]["value"]))
    assert "does not allow answering" in await note_to(bot, "UBOB")
    assert len(bot.slack.views) == views
    # A hand-made submission: the decision script refuses it.
    bot.slack.ephemerals.clear()
    await forged(bot, card, "UBOB", "answer_instead", ANSWER)
    assert "does not allow answering" in await note_to(bot, "UBOB")
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    trail = await bot.audit_until("finished")
    assert not events(trail, "answered") and len(events(trail, "executed")) == 1


async def test_an_answer_after_the_call_was_decided_is_refused(bot: Harness) -> None:
    root, card = await waiting(bot)
    opened = await bot.sender.open_modal(card, "answer", user="UBOB")
    await bot.sender.reject(card, user="UCAROL", reason="no")
    await bot.final_answer(root)
    await bot.sender.submit_text(opened, user="UBOB", text=ANSWER)
    note = await note_to(bot, "UBOB")
    assert "run has finished" in note or "already rejected" in note, note
    assert not events(await bot.audit_until("finished"), "answered")


# --- Approve with a note… ---------------------------------------------------------------------


async def test_a_note_is_read_after_the_output_of_the_tool_that_ran_once(bot: Harness) -> None:
    root, card = await waiting(bot)
    status, _ = await bot.sender.approve_with_note(card, user="UBOB", note=NOTE)
    assert status == 200
    await bot.final_answer(root)
    assert told(bot) == f"deleted u-100\n\nNote from @ubob: {NOTE}"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert "<@UBOB> approved `delete_user`" in card.all_text()
    assert f"Note from <@UBOB>: {NOTE}" in card.all_text()
    trail = await bot.audit_until("finished")
    [approved], [asked] = events(trail, "approved"), events(trail, "requested")
    assert approved["note"] == NOTE and approved["digest"] == asked["digest"]
    assert len(events(trail, "executed")) == 1


@with_env(POLICY=QUORUM)
async def test_under_a_quorum_every_approvers_note_is_passed_on(bot: Harness) -> None:
    root, card = await waiting(bot)
    await bot.sender.approve_with_note(card, user="UBOB", note="checked the ticket")
    await bot.slack.wait_for(lambda: "1 of 2 approvals" in card.all_text(), what="1 of 2")
    assert agents.EXECUTIONS == []
    # The same person again counts once, note or not.
    await bot.sender.approve_with_note(card, user="UBOB", note="again")
    assert "You already approved this" in await note_to(bot, "UBOB")
    await bot.sender.approve_with_note(card, user="UCAROL", note=NOTE)
    await bot.final_answer(root)
    assert told(bot) == (
        f"deleted u-100\n\nNote from @ubob: checked the ticket\nNote from @ucarol: {NOTE}"
    )
    assert len(agents.EXECUTIONS) == 1
    text = card.all_text()
    assert "Note from <@UBOB>: checked the ticket" in text and "again" not in text
    trail = await bot.audit_until("finished")
    assert [e.get("note") for e in events(trail, "approved")] == ["checked the ticket", NOTE]


async def test_a_note_on_ones_own_request_is_refused_like_an_approval(bot: Harness) -> None:
    root, card = await waiting(bot)
    await bot.sender.click(card, "approve_note", user="UALICE")
    assert (await note_to(bot, "UALICE")).startswith("You asked for this")
    bot.slack.ephemerals.clear()
    await forged(bot, card, "UALICE", "approve_note", "fine by me")
    assert (await note_to(bot, "UALICE")).startswith("You asked for this")
    await bot.audit_until("denied")
    assert agents.EXECUTIONS == [] and len(bot.model.requests) == 1
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    assert told(bot) == "deleted u-100", "no note without one"


@with_env(APPROVERS="UBOB")
async def test_a_note_from_the_home_tab(bot: Harness) -> None:
    root, card = await waiting(bot)
    await open_home(bot, "UBOB")
    [note_button] = [b for b in home_buttons(bot, "UBOB") if b["action_id"] == "home_approve_note"]
    assert note_button["text"]["text"] == "Approve with a note…"
    views = len(bot.slack.views)
    await bot.sender.click_home("UBOB", "home_approve_note", note_button["value"])
    await bot.slack.wait_for(lambda: len(bot.slack.views) > views, what="the note modal")
    await bot.sender.submit_text(bot.slack.views[-1], user="UBOB", text=NOTE)
    await bot.final_answer(root)
    assert told(bot) == f"deleted u-100\n\nNote from @ubob: {NOTE}"
    assert f"Note from <@UBOB>: {NOTE}" in card.all_text()
    assert len(agents.EXECUTIONS) == 1


@with_env(POLICY=QUORUM)
async def test_a_note_is_refused_from_someone_who_may_not_decide_and_on_a_changed_call(
    bot: Harness,
) -> None:
    root, card = await waiting(bot)
    views = len(bot.slack.views)
    await bot.sender.click(card, "approve_note", user="UEVE")
    assert "may decide `delete_user`, so nothing was recorded" in await note_to(bot, "UEVE")
    assert len(bot.slack.views) == views, "no modal for someone who may not decide"
    opened = await bot.sender.open_modal(card, "approve_note", user="UBOB")
    editor = await open_editor(bot, card, user="UCAROL")
    assert await submit(bot, editor, '{"user_id": "u-999"}', user="UCAROL") == {}
    await bot.slack.wait_for(lambda: "u-999" in card.all_text(), what="the edited card")
    await bot.sender.submit_text(opened, user="UBOB", text=NOTE)
    assert "This call changed since your screen showed it" in await note_to(bot, "UBOB")
    assert agents.EXECUTIONS == [] and "1 of 2 approvals" in card.all_text()

    await bot.sender.approve_with_note(card, user="UBOB", note=NOTE)
    await bot.final_answer(root)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-999"})]
    assert told(bot).endswith(f"deleted u-999\n\nNote from @ubob: {NOTE}")
    trail = await bot.audit_until("finished")
    assert [e.get("note") for e in events(trail, "approved")] == [None, NOTE], "carol, then bob"
