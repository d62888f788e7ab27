"""Batch decisions (issue 20 item 2) on real processes: **Approve all** and **Reject all** on the
status message of a run that asks twice, through signed requests to the web and a real worker.
Each call is bound to the digest the modal showed; all or nothing; one resume."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import with_env
from tests.runtime.deciders.test_approvers import ephemeral_for
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.support import agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness


def delete_and_restart(request: ModelRequest) -> list[Item]:
    """Ask for two calls in one turn; once told both outcomes, answer with them."""
    if not request.tool_outputs:
        return [
            tool_call("delete_user", {"user_id": "u-101"}, "call_del"),
            tool_call("restart_service", {"service": "search"}, "call_rst"),
        ]
    outputs = request.tool_outputs
    return [message(f"done: {outputs['call_del']} / {outputs['call_rst']}")]


async def status_with_batch(bot: Harness, root: Message) -> Message:
    def offered() -> Message | None:
        for m in bot.slack.status_messages(root.ts):
            if "approve_all" in m.action_ids():
                return m
        return None

    found: Message = await bot.slack.wait_for(offered, what="Approve all on the status")
    return found


async def open_batch(bot: Harness, status: Message, action: str, *, user: str) -> dict[str, Any]:
    opened = len(bot.slack.views)
    code, _ = await bot.sender.click(status, action, user=user)
    assert code == 200
    await bot.slack.wait_for(lambda: len(bot.slack.views) > opened, what="batch modal")
    return bot.slack.views[-1]


def resumed(bot: Harness) -> int:
    return len([r for r in bot.model.requests if r.tool_outputs])


async def test_approve_all_runs_each_call_once_with_one_resume(bot: Harness) -> None:
    bot.model.script = delete_and_restart
    root = await bot.start_run("delete u-101 and restart search")
    cards = await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    assert status.action_ids() == ["approve_all", "reject_all", "stop_run"]
    modal = await open_batch(bot, status, "approve_all", user="UBOB")
    shown = json.dumps(modal)
    assert "delete_user" in shown and "restart_service" in shown and "u-101" in shown
    for card in cards:
        digest = str(card.actions()[0]["value"]).rsplit(":", 1)[1]
        assert digest[:12] in shown, "each call with its digest"

    code, _ = await bot.sender.submit_view(modal, user="UBOB", values={})
    assert code == 200
    answer = await bot.final_answer(root)
    assert answer.text == "done: deleted u-101 / restarted search"
    assert sorted(agents.EXECUTIONS) == [
        ("delete_user", {"user_id": "u-101"}),
        ("restart_service", {"service": "search"}),
    ]
    assert resumed(bot) == 1, "exactly one resume"
    trail = await bot.audit_until("approved")
    approved = [e for e in trail if e["event"] == "approved"]
    assert len(approved) == 2 and len({e["batch"] for e in approved}) == 1
    assert {e["user_id"] for e in approved} == {"UBOB"}
    await bot.slack.wait_for(
        lambda: all("approve" not in c.action_ids() for c in cards), what="both cards redrawn"
    )
    assert "Approved both calls." in await ephemeral_for(bot, "UBOB")


@with_env(APPROVERS="UBOB")
async def test_approve_all_by_a_non_approver_records_nothing_and_says_which(
    bot: Harness,
) -> None:
    bot.model.script = delete_and_restart
    root = await bot.start_run("delete u-101 and restart search")
    cards = await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    await bot.sender.click(status, "approve_all", user="UCAROL")
    told = await ephemeral_for(bot, "UCAROL")
    assert told.startswith("Only ") and "may decide `delete_user`" in told, "before any modal"
    assert bot.slack.views == []

    # A modal open before (bob's), submitted by carol: the decision script refuses it too.
    modal = await open_batch(bot, status, "approve_all", user="UBOB")
    await bot.sender.submit_view(modal, user="UCAROL", values={})
    note = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UCAROL"][1:], what="a 2nd note"
    )
    assert note[0]["text"] == (
        "You may not decide `delete_user`, `restart_service`, "
        "so nothing was recorded for any call of this run."
    )
    trail = [e[b"event"] for e in await bot.audit_entries()]
    assert b"approved" not in trail and agents.EXECUTIONS == []
    assert all("approve" in c.action_ids() for c in cards)


async def test_approve_all_on_a_call_edited_meanwhile_is_refused(bot: Harness) -> None:
    bot.model.script = delete_and_restart
    root = await bot.start_run("delete u-101 and restart search")
    cards = await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    modal = await open_batch(bot, status, "approve_all", user="UBOB")
    # Someone else edits the restart while the list is open (under a quorum of one, the
    # edit approves the edited arguments: the list's digest is no longer the call's).
    card = next(c for c in cards if "restart_service" in c.all_text())
    editor = await open_editor(bot, card, user="UCAROL")
    await submit(bot, editor, '{"service": "api"}', user="UCAROL")
    await bot.audit_until("edited")
    await bot.slack.wait_for(
        lambda: "approve_all" not in status.action_ids(), what="one call left: no Approve all"
    )

    await bot.sender.submit_view(modal, user="UBOB", values={})
    note = await ephemeral_for(bot, "UBOB")
    assert "`restart_service` changed or was decided since the list was shown" in note
    trail = [e for e in await bot.audit_entries() if e[b"event"] == b"approved"]
    assert [json.loads(e[b"details"])["user_id"] for e in trail] == ["UCAROL"]
    assert agents.EXECUTIONS == [], "the delete still waits for its own decision"
    delete = next(c for c in cards if "delete_user" in c.all_text())
    assert "approve" in delete.action_ids()


async def test_reject_all_asks_one_reason_that_the_model_reads_for_each(bot: Harness) -> None:
    bot.model.script = delete_and_restart
    root = await bot.start_run("delete u-101 and restart search")
    await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    modal = await open_batch(bot, status, "reject_all", user="UBOB")
    empty = {"batch_reason": {"batch_reason_input": {"type": "plain_text_input", "value": " "}}}
    _, body = await bot.sender.submit_view(modal, user="UBOB", values=empty)
    assert json.loads(body)["response_action"] == "errors"
    reason = {
        "batch_reason": {"batch_reason_input": {"type": "plain_text_input", "value": "freeze"}}
    }
    await bot.sender.submit_view(modal, user="UBOB", values=reason)
    await bot.final_answer(root)
    told = bot.model.requests[-1].tool_outputs
    assert "freeze" in told["call_del"] and "freeze" in told["call_rst"], told
    assert agents.EXECUTIONS == [] and resumed(bot) == 1
    trail = await bot.audit_until("rejected")
    rejected = [e for e in trail if e["event"] == "rejected"]
    assert len(rejected) == 2 and len({e["batch"] for e in rejected}) == 1


def two_long_calls(delete_chars: int, restart_chars: int) -> Any:
    """Ask for two calls whose arguments are `delete_chars` and `restart_chars` long (more than
    the 200 characters the modal once showed of each)."""
    user_id, service = "u-" + "1" * delete_chars, "s-" + "2" * restart_chars

    def script(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            return [
                tool_call("delete_user", {"user_id": user_id}, "call_del"),
                tool_call("restart_service", {"service": service}, "call_rst"),
            ]
        outputs = request.tool_outputs
        return [message(f"done: {len(outputs['call_del'])} / {len(outputs['call_rst'])}")]

    return script


def digests(cards: list[Message]) -> dict[str, str]:
    """Each card's tool and the full digest its buttons bind."""
    return {
        ("delete_user" if "delete_user" in c.all_text() else "restart_service"): str(
            c.actions()[0]["value"]
        ).rsplit(":", 1)[1]
        for c in cards
    }


async def test_approve_all_shows_every_argument_and_the_whole_digest_it_binds(
    bot: Harness,
) -> None:
    bot.model.script = two_long_calls(600, 5000)
    root = await bot.start_run("delete and restart, long")
    cards = await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    modal = await open_batch(bot, status, "approve_all", user="UBOB")
    # The sections' text, their code blocks joined again.
    sections = [b["text"]["text"] for b in modal["blocks"] if b.get("type") == "section"]
    shown = "".join(sections).replace("```", "").replace("\n", "")
    assert '"u-' + "1" * 600 + '"' in shown, "all of the delete's arguments"
    assert '"s-' + "2" * 5000 + '"' in shown, "all of the restart's, over several blocks"
    for digest in digests(cards).values():
        assert f"sha256:{digest}" in shown, "the whole digest"
    assert "shortened" not in json.dumps(modal)

    await bot.sender.submit_view(modal, user="UBOB", values={})
    assert (await bot.final_answer(root)).text.startswith("done:")
    assert sorted(len(args[next(iter(args))]) for _tool, args in agents.EXECUTIONS) == [
        602,
        5002,
    ]


async def test_a_call_the_modal_cannot_show_whole_is_left_out_of_the_batch(bot: Harness) -> None:
    bot.model.script = two_long_calls(10, 400_000)
    root = await bot.start_run("delete and restart, too long to list")
    cards = await bot.cards(root, 2)
    status = await status_with_batch(bot, root)
    modal = await open_batch(bot, status, "approve_all", user="UBOB")
    texts = json.dumps(modal)
    assert "This approves this call, each exactly as shown here" in texts
    assert "`restart_service` is not in this list, because the arguments are too long" in texts
    assert "s-222" not in texts, "none of it listed"
    delete = next(c for c in cards if "delete_user" in c.all_text())
    delete_aid = str(delete.actions()[0]["value"]).split(":")[1]
    assert list(json.loads(modal["private_metadata"])["calls"]) == [delete_aid], "what it binds"

    await bot.sender.submit_view(modal, user="UBOB", values={})
    trail = await bot.audit_until("approved")
    assert len([e for e in trail if e["event"] == "approved"]) == 1
    await bot.slack.wait_for(lambda: "approve" not in delete.action_ids(), what="delete decided")
    restart = next(c for c in cards if "restart_service" in c.all_text())
    assert "approve" in restart.action_ids(), "decided on its card"
    await bot.sender.click(restart, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: 20 / 400012"
    assert resumed(bot) == 1
