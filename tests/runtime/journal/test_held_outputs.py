"""Check what comes back (issue 35, part 3): a rule's `review_output` holds a tool's output for a
person before the model reads it. The tool runs once, as approved; its output is journaled held,
the run waits, and a card shows it with **Release** and **Withhold**, decided through the same
script, gate, digest and trail as the call's approval. Nobody deciding in time withholds it."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from runtime.examples.ops import list_users as demo_list_users
from tests.bot.home.test_home_tab import open_home
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.test_faults import ledger

ROOT = Path(__file__).resolve().parents[3]

REVIEWED = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "UCAROL"]
review_output = true
"""

REVIEWED_WHEN = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "UCAROL"]
review_output_when = "args.user_id == 'u-100'"
"""

SHORT = REVIEWED + "ttl_seconds = 3\n"

READS_REVIEWED = """
[[rule]]
tool = "list_users"
auto = "approve"
review_output = true
"""
HELD = "Its output is held"


@pytest.fixture
def env_overrides(tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    env = dict(getattr(request, "param", {"POLICY": REVIEWED}))
    path = tmp_path / "policy.toml"
    path.write_text(env.pop("POLICY"))
    env["POLICY_FILE"] = str(path)
    return env


def policy(text: str) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("env_overrides", [{"POLICY": text}], indirect=True, ids=["p"])


def events(trail: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in trail if e["event"] == name]


async def held_card(bot: Harness | Deployment, root: Message, timeout: float = 20) -> Message:
    def ready() -> Message | None:
        cards = [c for c in bot.slack.cards() if c.thread_ts == root.ts]
        return next((c for c in cards if HELD in c.all_text() and c.actions()), None)

    card: Message = await bot.slack.wait_for(ready, timeout, "the held output's card")
    return card


async def approved_and_held(bot: Harness) -> tuple[Message, Message]:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert "delete_user" in await open_home(bot, "UBOB"), "the call's approval is on it"
    await bot.sender.click(card, "approve", user="UBOB")
    return root, await held_card(bot, root)


def model_read(bot: Harness) -> str:
    return str(bot.model.requests[-1].tool_outputs["call_del"])


def anything_read(bot: Harness | Deployment, text: str) -> bool:
    return any(text in json.dumps(r.tool_outputs) for r in bot.model.requests)


async def note_to(bot: Harness, user: str) -> str:
    notes = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == user], what=f"note to {user}"
    )
    return str(notes[-1]["text"])


async def test_a_released_output_is_what_the_model_reads_and_the_tool_ran_once(
    bot: Harness,
) -> None:
    root, card = await approved_and_held(bot)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert "deleted u-100" in card.all_text()
    assert card.action_ids() == ["approve", "answer", "reject"]
    assert [b["text"]["text"] for b in card.actions()] == [
        "Release",
        "Edit and release",
        "Withhold",
    ]
    assert len(bot.model.requests) == 1 and not anything_read(bot, "deleted u-100")

    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert model_read(bot) == "deleted u-100"
    assert len(agents.EXECUTIONS) == 1, "released from the journal, not run again"
    assert "released the output of `delete_user`" in card.all_text() and card.actions() == []
    trail = await bot.audit_until("finished")
    [held], [released] = events(trail, "output_held"), events(trail, "output_released")
    assert released["user_id"] == "UCAROL" and released["digest"] == held["digest"]
    [executed] = events(trail, "executed")
    assert held["digest"] != executed["digest"], "bound to the output, not only the call"
    assert "u-100" not in json.dumps(executed), "the held output stays out of the trail"
    assert not events(trail, "output_withheld")


async def test_an_edited_output_is_what_the_model_reads_and_the_trail_keeps_both_digests(
    bot: Harness,
) -> None:
    root, card = await approved_and_held(bot)
    modal = await bot.sender.open_modal(card, "answer", user="UCAROL")
    assert "deleted u-100" in json.dumps(modal), "the modal starts from the held output"
    status, _ = await bot.sender.submit_text(modal, user="UCAROL", text="deleted a user")
    assert status == 200
    assert (await bot.final_answer(root)).text == "done: deleted a user"
    assert model_read(bot) == "deleted a user" and not anything_read(bot, "u-100")
    assert len(agents.EXECUTIONS) == 1
    assert "edited the output of `delete_user`" in card.all_text() and card.actions() == []
    trail = await bot.audit_until("finished")
    [held], [edited] = events(trail, "output_held"), events(trail, "output_edited")
    assert edited["digest"] == held["digest"], "bound to the output the card showed"
    assert edited["answer_digest"] == hashlib.sha256(b"deleted a user").hexdigest()
    assert edited["user_id"] == "UCAROL" and not events(trail, "output_released")


async def test_a_withheld_output_never_reaches_the_model(bot: Harness) -> None:
    root, card = await approved_and_held(bot)
    await bot.sender.reject(card, user="UCAROL", reason="it names a customer")
    await bot.final_answer(root)
    assert model_read(bot) == (
        "`delete_user` ran, but the output was withheld by @ucarol: it names a customer"
    )
    assert not anything_read(bot, "deleted u-100")
    assert len(agents.EXECUTIONS) == 1
    assert "withheld the output of `delete_user`: it names a customer" in card.all_text()
    assert "deleted u-100" not in card.all_text(), "a withheld output is not redrawn"
    trail = await bot.audit_until("finished")
    [withheld] = events(trail, "output_withheld")
    assert withheld["reason"] == "it names a customer" and withheld["user_id"] == "UCAROL"


@policy(SHORT)
async def test_nobody_releasing_in_time_withholds_it(bot: Harness) -> None:
    root, card = await approved_and_held(bot)
    await bot.final_answer(root, timeout=20)
    assert "its output was withheld: nobody released it in time" in model_read(bot)
    assert not anything_read(bot, "deleted u-100") and len(agents.EXECUTIONS) == 1
    assert "Nobody released the output" in card.all_text() and card.actions() == []
    trail = await bot.audit_until("finished")
    assert len(events(trail, "output_withheld")) == 1


async def test_a_person_who_may_not_decide_is_refused_and_told_privately(bot: Harness) -> None:
    root, card = await approved_and_held(bot)
    await bot.sender.click(card, "approve", user="UEVE")
    assert "nothing was recorded" in await note_to(bot, "UEVE")
    bot.slack.ephemerals.clear()
    views = len(bot.slack.views)
    await bot.sender.click(card, "reject", user="UEVE")  # Withhold: refused before its modal
    assert "nothing was recorded" in await note_to(bot, "UEVE")
    assert len(bot.slack.views) == views
    trail = await bot.audit_until("denied")
    assert not events(trail, "output_released") and len(bot.model.requests) == 1
    # A click with the digest of the call, not of its output: stale.
    call_digest = events(trail, "executed")[0]["digest"]
    value = str(card.actions()[0]["value"]).rsplit(":", 1)[0] + ":" + call_digest
    await bot.sender.click(card, "approve", user="UBOB", value=value)
    assert "changed since your screen showed it" in await note_to(bot, "UBOB")
    # Not on the Home tab: decided where the output is shown.
    assert "delete_user" not in await open_home(bot, "UBOB")
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


@policy(REVIEWED_WHEN)
async def test_review_output_when_holds_on_the_calls_arguments(bot: Harness) -> None:
    root, card = await approved_and_held(bot)
    await bot.sender.click(card, "approve", user="UCAROL")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


def list_then_answer(request: ModelRequest) -> list[Item]:
    if not request.tool_outputs:
        return [tool_call("list_users", {}, "call_list")]
    return [message("users: " + request.tool_outputs["call_list"])]


@policy(READS_REVIEWED)
async def test_a_call_the_policy_approves_still_has_its_output_held(bot: Harness) -> None:
    bot.model.script = list_then_answer
    root = await bot.start_run("list the users")
    card = await held_card(bot, root)
    assert [c for c in bot.slack.cards() if c.thread_ts == root.ts] == [card], "no approval card"
    assert agents.EXECUTIONS == [("list_users", {})] and len(bot.model.requests) == 1
    await bot.sender.reject(card, user="UBOB", reason="emails")
    await bot.final_answer(root)
    read = str(bot.model.requests[-1].tool_outputs["call_list"])
    assert read == "`list_users` ran, but the output was withheld by @ubob: emails"
    assert not anything_read(bot, "u-100") and len(agents.EXECUTIONS) == 1


async def test_a_worker_killed_while_the_output_is_held(
    deployment: Deployment, tmp_path: Path
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(REVIEWED)
    env = {"POLICY_FILE": str(path)}
    deployment.model.script = delete_then_answer
    await deployment.web(**env)
    worker = deployment.worker("worker.1", **env)
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    held = await held_card(deployment, root, timeout=60)
    worker.signal(signal.SIGKILL)
    deployment.worker("worker.2", **env)
    await deployment.sender.click(held, "approve", user="UCAROL")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    assert [e["call_id"] for e in await ledger(deployment)] == ["call_del"], "ran once"


async def test_the_demos_user_list_waits_for_a_release(
    redis_url: str, prefix: str, pretend_world: None
) -> None:
    """The console's tour: `/agent list users` runs at once; bob releases what the agent reads."""
    env = {
        "AGENTS": "runtime.examples:AGENTS",
        "POLICY_FILE": str(ROOT / "bot" / "console" / "demo_policy.toml"),
        "APPROVERS": "UALICE,UBOB,UCAROL",
    }
    demo = Harness(redis_url=redis_url, prefix=prefix, env=env, scripted_model=True)
    await demo.start()
    try:
        root = await demo.start_run("list users")
        card = await held_card(demo, root)
        assert "Grace Hopper" in card.all_text()
        await demo.sender.click(card, "approve", user="UBOB")
        assert "Grace Hopper" in (await demo.final_answer(root)).text
    finally:
        await demo.stop()
    assert demo_list_users.needs_approval is False, "as it was, for the tests that follow"
