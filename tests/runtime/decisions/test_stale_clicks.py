"""A click counts only for the call its screen showed: every decision element (the card's
buttons, a copy's, the Home tab's, the Edit and Reject modals) carries the digest of the call
as it drew it, and once an edit changed the call, a click on the old one is refused and the
person told privately to look again. Also: the Home tab offers its decisions only with the full
arguments a click away, and "anyone" may stop a run only from the call's channel."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runtime.calls.digest import call_digest
from runtime.record import layout as rr
from tests.bot.home.test_home_tab import home_buttons, open_home
from tests.runtime.decisions.test_edits import edit_button, open_editor, submit
from tests.runtime.record.test_reach import copies_recorded, copy_in
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer

CHANGED = "This call changed since your screen showed it"

QUORUM = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "UCAROL"]
quorum = 2
notify = ["COPS"]
"""

EDITED = '{"user_id": "u-999"}'


@pytest.fixture
def env_overrides(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    policy: str | None = getattr(request, "param", QUORUM)
    if policy is None:
        return {}
    path = tmp_path / "policy.toml"
    path.write_text(policy)
    return {"POLICY_FILE": str(path)}


def with_policy(policy: str | None) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("env_overrides", [policy], indirect=True, ids=["policy"])


async def quorum_card(bot: Harness) -> tuple[Message, Message, str]:
    """A run waiting on Bob and Carol both approving `delete_user u-100`; the card's value."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    return root, card, str(card.actions()[0]["value"])


async def bob_edits(bot: Harness, card: Message) -> None:
    """Bob edits the call (u-100 → u-999): his approval is the first of two, for the edit."""
    modal = await open_editor(bot, card, user="UBOB")
    assert await submit(bot, modal, EDITED, user="UBOB") == {}
    await bot.slack.wait_for(
        lambda: (
            "1 of 2 approvals: <@UBOB> approved; <@UCAROL> can approve" in card.all_text()
            and "u-999" in card.all_text()
        ),
        what="the card showing Bob's edit",
    )


async def note_to(bot: Harness, user: str) -> str:
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == user], what=f"note to {user}"
    )
    return str(notes[-1]["text"])


async def still_undecided(bot: Harness, value: str) -> None:
    run_id, approval_id = value.split(":")[:2]
    key = bot.keys.run(run_id)
    assert await bot.redis.hget(key, rr.DECISION + approval_id) is None, "nothing decided"
    approvals = json.loads(await bot.field(key, rr.APPROVALS + approval_id))
    assert [a["user_id"] for a in approvals] == ["UBOB"], "only Bob's approval counts"
    assert agents.EXECUTIONS == []


async def test_a_stale_approve_does_not_complete_the_quorum_of_an_edited_call(
    bot: Harness,
) -> None:
    root, card, seen_by_carol = await quorum_card(bot)
    await bob_edits(bot, card)

    # Carol's client still shows u-100: her Approve is refused, and she is told privately.
    await bot.sender.click(card, "approve", user="UCAROL", value=seen_by_carol)
    assert (await note_to(bot, "UCAROL")).startswith(CHANGED)
    await still_undecided(bot, seen_by_carol)
    trail = [e[b"event"] for e in await bot.audit_entries()]
    assert trail.count(b"approved") == 1, "Bob's edit, nothing of Carol's"

    # The card she looks at again shows the edit and its digest; her Approve of that counts.
    assert f"sha256:{call_digest('delete_user', EDITED)[:16]}" in card.all_text()
    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text.endswith("deleted u-999")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-999"})]


async def test_on_real_processes_a_stale_approve_is_refused_and_the_edit_runs_once(
    deployment: Deployment, tmp_path: Path
) -> None:
    """The Procfile's web and worker: Carol's click on the card as it was before Bob's edit is
    refused by the decision script; her click on the edited card completes the quorum."""
    policy = tmp_path / "quorum.toml"
    policy.write_text(QUORUM)
    deployment.model.script = delete_then_answer
    await deployment.web(POLICY_FILE=str(policy))
    deployment.worker("worker.1", POLICY_FILE=str(policy))
    slack, sender = deployment.slack, deployment.sender
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    seen_by_carol = str(card.actions()[0]["value"])

    button = edit_button(card)
    assert button is not None
    await sender.click(card, "edit_arguments", user="UBOB", value=button["value"])
    modal = await slack.wait_for(lambda: slack.views[-1] if slack.views else None, 20, "editor")
    values = {"arguments": {"arguments_input": {"type": "plain_text_input", "value": EDITED}}}
    await sender.submit_view(modal, user="UBOB", values=values)
    await slack.wait_for(
        lambda: "1 of 2 approvals: <@UBOB> approved; <@UCAROL> can approve" in card.all_text(),
        20,
        "1 of 2",
    )

    await sender.click(card, "approve", user="UCAROL", value=seen_by_carol)
    notes = await slack.wait_for(
        lambda: [e for e in slack.ephemerals if e["user"] == "UCAROL"], 20, "note to Carol"
    )
    assert str(notes[-1]["text"]).startswith(CHANGED)
    run_id, approval_id = seen_by_carol.split(":")[:2]
    key = deployment.keys.run(run_id)
    assert await deployment.redis.hget(key, rr.DECISION + approval_id) is None

    await sender.click(card, "approve", user="UCAROL")
    [answer] = await deployment.final_answers(root)
    assert answer.text.endswith("deleted u-999")
    executed: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    assert [json.loads(e)["arguments"] for e in executed] == [{"user_id": "u-999"}]


async def test_an_unchanged_edit_modal_submitted_after_another_edit_is_refused(
    bot: Harness,
) -> None:
    _root, card, value = await quorum_card(bot)
    carols = await open_editor(bot, card, user="UCAROL")  # she opens Edit first: u-100
    await bob_edits(bot, card)

    unchanged = carols["blocks"][1]["element"]["initial_value"]
    assert await submit(bot, carols, unchanged, user="UCAROL") == {}
    assert (await note_to(bot, "UCAROL")).startswith(CHANGED)
    await still_undecided(bot, value)
    assert "1 of 2 approvals: <@UBOB> approved; <@UCAROL> can approve" in card.all_text()


async def test_a_reject_modal_opened_before_an_edit_is_refused(bot: Harness) -> None:
    _root, card, value = await quorum_card(bot)
    opened = len(bot.slack.views)
    await bot.sender.click(card, "reject", user="UCAROL")
    await bot.slack.wait_for(lambda: len(bot.slack.views) > opened, what="reject modal")
    carols = bot.slack.views[-1]
    await bob_edits(bot, card)

    reason = {"reason": {"reason_input": {"type": "plain_text_input", "value": "u-100 is mine"}}}
    await bot.sender.submit_view(carols, user="UCAROL", values=reason)
    assert (await note_to(bot, "UCAROL")).startswith(CHANGED)
    await still_undecided(bot, value)


async def test_a_stale_click_on_a_copy_is_refused(bot: Harness) -> None:
    _root, card, value = await quorum_card(bot)
    await copies_recorded(bot, value, 1)
    copy = copy_in(bot, "COPS")
    seen_in_ops = str(copy.actions()[0]["value"])
    await bob_edits(bot, card)

    await bot.sender.click(copy, "approve", user="UCAROL", value=seen_in_ops)
    note = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == "UCAROL"], what="note to Carol"
    )
    assert note[-1]["channel"] == "COPS" and str(note[-1]["text"]).startswith(CHANGED)
    await still_undecided(bot, value)
    await bot.slack.wait_for(lambda: "u-999" in copy.all_text(), what="the copy redrawn")


async def test_a_stale_click_on_the_home_tab_is_refused(bot: Harness) -> None:
    _root, card, value = await quorum_card(bot)
    await open_home(bot, "UCAROL")
    [approve, *_] = home_buttons(bot, "UCAROL")
    await bob_edits(bot, card)

    await bot.sender.click_home("UCAROL", "home_approve", approve["value"])
    dm = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.messages.values() if m.channel == "UCAROL"],
        what="a direct message to Carol",
    )
    assert dm[-1].text.startswith(CHANGED)
    await still_undecided(bot, value)


async def test_a_click_from_a_card_drawn_before_cards_carried_a_digest_is_refused(
    bot: Harness,
) -> None:
    """A value of two parts (`run:approval`, from before this version) is stale, not a pass:
    nothing is recorded and the card is drawn anew, with the digest its next click carries."""
    root, card, value = await quorum_card(bot)
    updates = len(bot.slack.calls_to("chat.update"))
    legacy = ":".join(value.split(":")[:2])
    await bot.sender.click(card, "approve", user="UBOB", value=legacy)
    assert (await note_to(bot, "UBOB")).startswith(CHANGED)
    await bot.slack.wait_for(
        lambda: len(bot.slack.calls_to("chat.update")) > updates, what="the card redrawn"
    )
    run_id, approval_id = value.split(":")[:2]
    assert await bot.redis.hget(bot.keys.run(run_id), rr.APPROVALS + approval_id) is None

    await bot.sender.click(card, "approve", user="UBOB")
    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


LONG = "u-" + "0" * 220 + "; DROP TABLE customers;"


def long_delete(request: ModelRequest) -> list[Item]:
    if not request.tool_outputs:
        return [tool_call("delete_user", {"user_id": LONG}, "call_del")]
    return [message("done")]


@with_policy('[[rule]]\ntool = "delete_*"\napprovers = ["UBOB"]\n')
async def test_the_home_tab_offers_the_full_arguments_and_the_digest(bot: Harness) -> None:
    bot.model.script = long_delete
    root = await bot.start_run("delete the long one")
    await bot.cards(root, 1)
    tab = await open_home(bot, "UBOB")
    digest = call_digest("delete_user", json.dumps({"user_id": LONG}))
    assert "DROP TABLE" not in tab, "the tab shows the arguments only in part"
    assert f"sha256:{digest[:16]}" in tab
    buttons = {b["action_id"]: b for b in home_buttons(bot, "UBOB")}
    assert list(buttons) == [
        "home_approve",
        "home_approve_note",
        "home_approve_always",
        "home_reject",
        "home_view_arguments",
    ]

    views = len(bot.slack.views)
    await bot.sender.click_home(
        "UBOB", "home_view_arguments", buttons["home_view_arguments"]["value"]
    )
    await bot.slack.wait_for(lambda: len(bot.slack.views) > views, what="the arguments modal")
    shown = json.dumps(bot.slack.views[-1])
    assert "; DROP TABLE customers;" in shown and f"sha256:{digest[:16]}" in shown
    assert agents.EXECUTIONS == []

    await bot.sender.click_home("UBOB", "home_approve", buttons["home_approve"]["value"])
    assert (await bot.final_answer(root)).text == "done"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": LONG})]


@with_policy(None)
async def test_anyone_may_stop_a_run_only_from_its_channel(bot: Harness) -> None:
    """No policy: anyone in the run's channel may decide its call, so anyone there may stop it;
    from another channel, Eve is only told who may."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    run_id = str(card.actions()[0]["value"]).split(":")[0]

    status, body = await bot.sender.command(f"stop {run_id}", user="UEVE", channel="COTHER")
    assert status == 200
    assert body["text"].startswith("Only ") and "anyone in <#CGENERAL>" in body["text"]
    assert await bot.redis.hget(bot.keys.run(run_id), rr.STOPPED) is None
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]

    await bot.sender.command(f"stop {run_id}", user="UEVE", channel="CGENERAL")
    await bot.slack.wait_for(
        lambda: [n for n in bot.slack.notes(root.ts) if "Stopped by <@UEVE>" in n.text],
        what="the thread saying Eve stopped it",
    )
    assert agents.EXECUTIONS == []
