"""Calls that anyone in their channel may decide (the default policy) on the Home tab (issue 20,
item 3): listed for the channel's members as Slack names them (`conversations.members`), decided
there through the same script, and never for someone Slack does not list, nor when Slack cannot
say. The script itself refuses such a decision from the Home tab unless the web process found the
person in the call's channel or a copy's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
import redis.asyncio as aioredis

from bot.console.workspace import demo_defaults
from bot.settings import load_settings, with_console_defaults
from bot.words.members import CHANNEL_UNAVAILABLE, OUTSIDE_WORKSPACE, not_in_channel
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.db.local import free_port
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.record.layout import HOME_TAB
from runtime.record.store import RunStore
from tests.bot.console.test_console import Console, block_index
from tests.bot.home.test_home_tab import home_buttons, home_text, open_home, publish_costs
from tests.conftest import with_env
from tests.runtime.deciders.test_deciders import Case, waiting_call
from tests.runtime.deciders.test_outsiders import OTHER_ORG
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.test_faults import ledger

WAITS = "wants to run `delete_user`"


async def waiting_card(bot: Harness, members: list[str] | None) -> tuple[Message, Message]:
    """alice's run in #general waits on one card anyone there may decide; Slack lists `members`
    in #general (None: Slack does not say)."""
    if members is not None:
        bot.slack.channel_members["CGENERAL"] = members
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    return root, card


async def direct_messages(bot: Harness, user: str, count: int = 1) -> list[str]:
    def found() -> list[str]:
        return [m.text for m in bot.slack.messages.values() if m.channel == user]

    texts: list[str] = await bot.slack.wait_for(
        lambda: len(found()) >= count and found(), what=f"{count} message(s) to {user}"
    )
    return texts


async def test_a_default_policy_call_waits_on_its_channel_members_tabs_and_is_approved_there(
    bot: Harness,
) -> None:
    root, card = await waiting_card(bot, ["UALICE", "UBOB", "UCAROL", "UBOT0001"])
    bob = await open_home(bot, "UBOB")
    assert WAITS in bob and "Asked by <@UALICE> in <#CGENERAL>" in bob
    assert "Nothing waits for you" in await open_home(bot, "UEVE"), "not in #general"
    assert "Nothing waits for you" in await open_home(bot, "UALICE"), "her own run's call"

    [approve, *_] = home_buttons(bot, "UBOB")
    status, _ = await bot.sender.click_home("UBOB", "home_approve", approve["value"])
    assert status == 200
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert "<@UBOB> approved `delete_user`" in card.all_text() and card.action_ids() == []
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    trail = await bot.audit_until("approved")
    [approved] = [e for e in trail if e["event"] == "approved"]
    assert approved["user_id"] == "UBOB"
    await bot.slack.wait_for(
        lambda: "Nothing waits for you" in home_text(bot, "UBOB"), what="Bob's tab emptied"
    )


async def test_on_the_procfiles_processes_a_member_approves_from_the_home_tab_once(
    deployment: Deployment,
) -> None:
    deployment.slack.channel_members["CGENERAL"] = ["UALICE", "UBOB"]
    deployment.model.script = delete_then_answer
    await deployment.web()
    deployment.worker("worker.1")
    root = await deployment.start_run("delete u-100")
    await deployment.cards(root, 1)
    await deployment.sender.event({"type": "app_home_opened", "user": "UBOB", "tab": "home"})
    tabs = deployment.slack.home_tabs
    await deployment.slack.wait_for(lambda: WAITS in json.dumps(tabs.get("UBOB")), 20, "Bob's tab")
    [approve] = [
        e
        for b in tabs["UBOB"]["blocks"]
        if b.get("type") == "actions"
        for e in b["elements"]
        if e["action_id"] == "home_approve"
    ]
    await deployment.sender.click_home("UBOB", "home_approve", approve["value"])
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: deleted u-100"
    assert [e["tool"] for e in await ledger(deployment)] == ["delete_user"]


async def test_a_forged_home_click_by_someone_outside_the_channel_is_refused_by_the_script(
    bot: Harness,
) -> None:
    root, card = await waiting_card(bot, ["UALICE", "UBOB"])
    value = str(card.actions()[0]["value"])  # eve never saw it on her tab: she made it up
    await bot.sender.click_home("UEVE", "home_approve", value)
    assert await direct_messages(bot, "UEVE") == [not_in_channel("CGENERAL", "delete_user")]
    trail = await bot.audit_until("denied")
    [denied] = [e for e in trail if e["event"] == "denied"]
    assert denied["user_id"] == "UEVE" and denied["reason"] == "not_an_approver"
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    assert agents.EXECUTIONS == []
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"


async def test_when_slack_cannot_say_who_is_in_the_channel_nothing_is_listed_or_decided(
    bot: Harness,
) -> None:
    root, card = await waiting_card(bot, None)  # Slack answers `channel_not_found`
    assert "Nothing waits for you" in await open_home(bot, "UBOB")
    value = str(card.actions()[0]["value"])
    await bot.sender.click_home("UBOB", "home_approve", value)
    assert await direct_messages(bot, "UBOB") == [CHANNEL_UNAVAILABLE]
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    trail = await bot.audit_entries()
    assert [e[b"event"] for e in trail].count(b"approved") == 0
    assert agents.EXECUTIONS == []

    # Slack answers again: the same click goes through.
    bot.slack.channel_members["CGENERAL"] = ["UALICE", "UBOB"]
    await bot.sender.click_home("UBOB", "home_approve", value)
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert len(agents.EXECUTIONS) == 1


async def test_leaving_the_channel_takes_the_call_off_the_tab_and_joining_brings_it(
    bot: Harness,
) -> None:
    _root, card = await waiting_card(bot, ["UALICE", "UBOB"])
    assert WAITS in await open_home(bot, "UBOB")
    assert "Nothing waits for you" in await open_home(bot, "UCAROL")

    bot.slack.channel_members["CGENERAL"] = ["UALICE", "UCAROL"]
    for event, user in (("member_left_channel", "UBOB"), ("member_joined_channel", "UCAROL")):
        status, _ = await bot.sender.event(
            {"type": event, "user": user, "channel": "CGENERAL", "channel_type": "C"}
        )
        assert status == 200
    await bot.slack.wait_for(
        lambda: "Nothing waits for you" in home_text(bot, "UBOB"), what="the call off Bob's tab"
    )
    await bot.slack.wait_for(lambda: WAITS in home_text(bot, "UCAROL"), what="it on Carol's tab")
    # Bob's old tab's button no longer decides it.
    await bot.sender.click_home("UBOB", "home_approve", str(card.actions()[0]["value"]))
    assert await direct_messages(bot, "UBOB") == [not_in_channel("CGENERAL", "delete_user")]
    assert agents.EXECUTIONS == []


async def test_an_outsider_in_the_channel_is_not_listed_and_may_not_decide_there(
    bot: Harness,
) -> None:
    bot.slack.people["UEVE"] = OTHER_ORG  # Slack Connect: eve is in #general, of another org
    _root, card = await waiting_card(bot, ["UALICE", "UBOB", "UEVE"])
    assert "Nothing waits for you" in await open_home(bot, "UEVE")
    await bot.sender.click_home("UEVE", "home_approve", str(card.actions()[0]["value"]))
    assert await direct_messages(bot, "UEVE") == [OUTSIDE_WORKSPACE]
    assert agents.EXECUTIONS == []


@with_env(EXTERNAL_DECIDERS="allow")
async def test_an_outsider_in_the_channel_decides_there_where_the_policy_lets_outsiders(
    bot: Harness,
) -> None:
    bot.slack.people["UEVE"] = OTHER_ORG
    root, _card = await waiting_card(bot, ["UALICE", "UEVE"])
    assert WAITS in await open_home(bot, "UEVE")
    [approve, *_] = home_buttons(bot, "UEVE")
    await bot.sender.click_home("UEVE", "home_approve", approve["value"])
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    trail = await bot.audit_until("approved")
    [approved] = [e for e in trail if e["event"] == "approved"]
    assert approved["user_id"] == "UEVE" and approved["team"] == "T0THERORG"


COPIED_TO_OPS = '[[rule]]\ntool = "delete_*"\nanyone = true\nnotify = ["COPS"]\n'


@pytest.fixture
def env_overrides(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """A test's own settings (`with_env`); a `POLICY` among them is the policy file's text."""
    env: dict[str, str] = dict(getattr(request, "param", {}))
    if "POLICY" in env:
        path = tmp_path / "policy.toml"
        path.write_text(env.pop("POLICY"))
        env["POLICY_FILE"] = str(path)
    return env


@with_env(POLICY=COPIED_TO_OPS)
async def test_the_members_of_a_copys_channel_may_decide_from_their_tabs(bot: Harness) -> None:
    bot.slack.channel_members["COPS"] = ["UDAVE"]
    root, _card = await waiting_card(bot, ["UALICE", "UBOB"])
    await bot.slack.wait_for(lambda: bot.slack.copies(), what="the copy in #ops")
    assert WAITS in await open_home(bot, "UDAVE")
    [approve, *_] = home_buttons(bot, "UDAVE")
    await bot.sender.click_home("UDAVE", "home_approve", approve["value"])
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert len(agents.EXECUTIONS) == 1


async def test_what_a_publish_costs_does_not_grow_with_the_calls_anyone_may_decide(
    bot: Harness,
) -> None:
    """Each tab asks Redis for the channel's members and the person's standing once, however
    many of its calls want them; Slack is asked once per channel until the cache lapses."""
    viewers = [f"UM{n}" for n in range(8)]
    bot.slack.channel_members["CGENERAL"] = ["UALICE", *viewers]
    few, many = await publish_costs(bot, viewers)
    assert many < few + 15, (few, many)
    assert len(bot.slack.calls_to("conversations.members")) == 1
    assert len(bot.slack.calls_to("users.info")) <= len(viewers) + 1


# --- the script, on its own --------------------------------------------------------------------


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


@pytest.mark.parametrize(
    ("in_channel", "status"),
    [(None, "not_allowed"), ("COTHER", "not_allowed"), ("C1", "recorded")],
    ids=["an older web says nothing", "another channel", "the call's channel"],
)
async def test_the_script_takes_a_home_decision_of_an_anyone_call_only_from_its_channel(
    redis: aioredis.Redis, prefix: str, in_channel: str | None, status: str
) -> None:
    keys = Keys(prefix)
    store, recorder = RunStore(redis, keys), DecisionRecorder(redis, keys)
    run_id, call = await waiting_call(store, Case(approvers=(), user="UBOB"))  # in C1
    view = await recorder.view(run_id, call.approval_id)
    choice = Choice(outcome="approved", user_id="UBOB", in_channel=in_channel)
    result = await recorder.decide(view, choice, channel=HOME_TAB, member_of=(), seen=call.digest)
    assert result.status == status


# --- the console ---------------------------------------------------------------------------------


async def test_the_console_lists_a_call_anyone_in_demo_may_decide_on_each_members_tab(
    redis_url: str, prefix: str, pretend_world: None
) -> None:
    """With nobody named in `APPROVERS`, anyone in #demo may decide: the console's stand-in
    Slack lists its three people there, so bob finds alice's call on his tab and decides it."""
    environ = {
        **demo_defaults(),
        "APPROVERS": "",
        "CONSOLE": "true",
        "PORT": str(free_port()),
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": prefix,
    }
    settings = load_settings(with_console_defaults(environ))
    async with aiohttp.ClientSession() as session:
        console = Console(settings, redis_url, session)
        await console.start()
        try:
            await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
            [card] = await console.wait_for(console.cards, "a card")
            await console.intent("UBOB", kind="home")
            await console.wait_for(lambda: "restart_service" in console.home("UBOB"), "bob's tab")
            await console.intent("UALICE", kind="home")
            await console.wait_for(lambda: console.home("UALICE") != "{}", "alice's tab")
            assert "Nothing waits for you" in console.home("UALICE")
            blocks = console.slack.home_tabs["UBOB"]["blocks"]
            index = block_index(blocks, "home_approve")
            await console.intent(
                "UBOB", kind="click", home=True, block_index=index, action_id="home_approve"
            )
            await console.wait_for(console.answers, "the answer")
            assert "<@UBOB> approved `restart_service`" in card.all_text()
        finally:
            await console.stop()
    assert console.refused == [], "real Slack would have refused these"
