"""The app's Home tab: what waits for me, in any channel, decided right there; my runs, stopped
right there; and the tab keeps up without being reopened."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.words.members import OUTSIDE_WORKSPACE
from runtime.db.local import RedisServer
from tests.runtime.deciders.test_outsiders import OTHER_ORG
from tests.support import agents
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.time_passing import lapse_debounce, refill_publish_rate

POLICY = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "S0SRE"]

[[rule]]
tool = "restart_*"
approvers = ["UCAROL"]
"""


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


def by_task(request: ModelRequest) -> list[Item]:
    """`delete u-100` asks to delete, `restart api` to restart; then says what happened."""
    if request.tool_outputs:
        return [message("done: " + "; ".join(request.tool_outputs.values()))]
    if "restart" in request.task:
        return [tool_call("restart_service", {"service": "api"}, "call_restart")]
    return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]


def home_text(bot: Harness, user: str) -> str:
    return json.dumps(bot.slack.home_tabs.get(user, {}), ensure_ascii=False)


def home_buttons(bot: Harness, user: str) -> list[dict[str, Any]]:
    blocks = bot.slack.home_tabs.get(user, {}).get("blocks", [])
    found = [e for b in blocks if b.get("type") == "actions" for e in b["elements"]]
    found += [b["accessory"] for b in blocks if "accessory" in b]
    return found


async def open_home(bot: Harness, user: str) -> str:
    """The person clicks the app's Home tab; returns the tab as published."""
    before = len(bot.slack.calls_to("views.publish"))
    status, _ = await bot.sender.event(
        {"type": "app_home_opened", "user": user, "channel": f"D{user}", "tab": "home"}
    )
    assert status == 200
    await bot.slack.wait_for(
        lambda: any(
            c.args.get("user_id") == user for c in bot.slack.calls_to("views.publish")[before:]
        ),
        what=f"{user}'s Home tab",
    )
    return home_text(bot, user)


async def start(bot: Harness, text: str, channel: str) -> None:
    cards = len(bot.slack.cards())
    status, _ = await bot.sender.command(text, user="UALICE", channel=channel)
    assert status == 200
    await bot.slack.wait_for(lambda: len(bot.slack.cards()) > cards, what=f"the card of {text}")


async def test_the_home_tab_lists_exactly_what_each_person_may_decide(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    await start(bot, "delete u-100", "CGENERAL")
    await start(bot, "restart api", "COPS")

    bob = await open_home(bot, "UBOB")
    assert "wants to run `delete_user`" in bob and "restart_service" not in bob
    assert "Asked by <@UALICE> in <#CGENERAL>" in bob
    assert [b["action_id"] for b in home_buttons(bot, "UBOB")] == [
        "home_approve",
        "home_approve_note",
        "home_approve_always",
        "home_reject",
    ]
    dave = await open_home(bot, "UDAVE")  # through @sre
    assert "delete_user" in dave and "restart_service" not in dave
    carol = await open_home(bot, "UCAROL")
    assert "restart_service" in carol and "delete_user" not in carol
    assert "in <#COPS>" in carol
    eve = await open_home(bot, "UEVE")
    assert "Nothing waits for you" in eve and "wants to run" not in eve

    alice = await open_home(bot, "UALICE")
    assert "Nothing waits for you" in alice, "her own runs' calls are not hers to approve"
    assert "*ops*: delete u-100" in alice and "*ops*: restart api" in alice
    assert "waiting for 1 approval" in alice
    assert [b["action_id"] for b in home_buttons(bot, "UALICE")] == ["home_stop"] * 2


async def test_deciding_on_the_home_tab_updates_the_card_resumes_the_run_and_the_tabs(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    assert "Nothing waits for you" in await open_home(bot, "UBOB")
    assert "You have no live runs" in await open_home(bot, "UALICE")
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    # The new approval reaches Bob's tab, and the run Alice's, without reopening them.
    await bot.slack.wait_for(lambda: home_buttons(bot, "UBOB"), what="the approval on Bob's tab")
    await bot.slack.wait_for(
        lambda: "waiting for 1 approval" in home_text(bot, "UALICE"), what="Alice's run"
    )
    [approve, *_] = home_buttons(bot, "UBOB")

    status, _ = await bot.sender.click_home("UBOB", "home_approve", approve["value"])
    assert status == 200
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    assert "<@UBOB> approved `delete_user`" in card.all_text() and card.action_ids() == []
    assert len(agents.EXECUTIONS) == 1

    # Both tabs are republished without being reopened.
    await bot.slack.wait_for(
        lambda: "Nothing waits for you" in home_text(bot, "UBOB"), what="Bob's tab emptied"
    )
    await bot.slack.wait_for(
        lambda: "You have no live runs" in home_text(bot, "UALICE"), what="Alice's run gone"
    )


async def test_a_click_on_the_home_tab_by_someone_who_may_not_decide_is_refused(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    value = str(card.actions()[0]["value"])
    await bot.sender.click_home("UEVE", "home_approve", value)
    note = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.messages.values() if m.channel == "UEVE"],
        what="a direct message to Eve",
    )
    assert note[0].text.startswith("Only UBOB or @sre may decide `delete_user`")
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]
    trail = await bot.audit_until("denied")
    assert [e["user_id"] for e in trail if e["event"] == "denied"] == ["UEVE"]


async def test_a_named_approver_from_another_organisation_does_not_see_the_call_on_their_tab(
    bot: Harness,
) -> None:
    """The policy names Bob, but Bob turns out to be of another organisation (Slack Connect):
    the script would refuse his click, so his tab does not offer the call."""
    bot.slack.people["UBOB"] = OTHER_ORG
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert "wants to run `delete_user`" in await open_home(bot, "UDAVE")
    assert "Nothing waits for you" in await open_home(bot, "UBOB")
    await bot.sender.click_home("UBOB", "home_approve", str(card.actions()[0]["value"]))
    note = await bot.slack.wait_for(
        lambda: [m for m in bot.slack.messages.values() if m.channel == "UBOB"],
        what="a direct message to Bob",
    )
    assert note[0].text == OUTSIDE_WORKSPACE
    assert agents.EXECUTIONS == []


async def test_rejecting_on_the_home_tab_asks_why_and_stop_stops_the_run(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await open_home(bot, "UBOB")
    [_approve, _note, _always, reject] = home_buttons(bot, "UBOB")
    views = len(bot.slack.views)
    await bot.sender.click_home("UBOB", "home_reject", reject["value"])
    await bot.slack.wait_for(lambda: len(bot.slack.views) > views, what="the reason modal")
    await bot.sender.submit_view(
        bot.slack.views[-1],
        user="UBOB",
        values={"reason": {"reason_input": {"type": "plain_text_input", "value": "not today"}}},
    )
    assert "not today" in (await bot.final_answer(root)).text
    assert "<@UBOB> rejected" in card.all_text()

    second = await bot.start_run("restart api")
    await bot.cards(second, 1)
    await open_home(bot, "UALICE")
    [stop] = home_buttons(bot, "UALICE")
    await bot.sender.click_home("UALICE", "home_stop", stop["value"])
    await bot.slack.wait_for(
        lambda: [n for n in bot.slack.notes(second.ts) if "Stopped by <@UALICE>" in n.text],
        what="the thread saying Alice stopped it",
    )
    assert agents.EXECUTIONS == []


async def test_a_burst_of_changes_republishes_a_tab_at_most_once_per_two_seconds(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    await open_home(bot, "UBOB")
    for _ in range(3):
        await start(bot, "delete u-100", "CGENERAL")
    await bot.slack.wait_for(
        lambda: home_text(bot, "UBOB").count("wants to run") == 3, what="three on Bob's tab"
    )
    published = [c.at for c in bot.slack.calls_to("views.publish") if c.args["user_id"] == "UBOB"]
    gaps = [later - earlier for earlier, later in itertools.pairwise(published)]
    assert gaps and min(gaps) >= 1.9, gaps


async def test_a_change_republishes_only_the_tabs_of_the_people_it_concerns(bot: Harness) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = by_task
    people = ("UBOB", "UCAROL", "UDAVE")
    for user in people:
        await open_home(bot, user)
    await lapse_debounce(bot.redis, bot.keys, people)  # the openings' debounce lapses
    before = len(bot.slack.calls_to("views.publish"))
    await start(bot, "restart api", "CGENERAL")  # only Carol may decide it
    await bot.slack.wait_for(
        lambda: "wants to run" in home_text(bot, "UCAROL"), what="the call on Carol's tab"
    )
    await asyncio.sleep(1.0)  # any other tab would have been published by now
    published = [c.args["user_id"] for c in bot.slack.calls_to("views.publish")[before:]]
    assert published == ["UCAROL"], published


async def commands_per_publish(bot: Harness, viewers: list[str], shown: int) -> float:
    """Redis commands (everyone's) per tab published for one more call the viewers may decide."""
    # Earlier publishes' debounce lapses, and their tokens come back.
    await lapse_debounce(bot.redis, bot.keys, viewers)
    await refill_publish_rate(bot.redis, bot.keys)
    before = len(bot.slack.calls_to("views.publish"))
    info: Any = await bot.redis.info("stats")
    start_commands = int(info["total_commands_processed"])
    await start(bot, "delete u-100", "CGENERAL")
    await bot.slack.wait_for(
        lambda: all(home_text(bot, v).count("wants to run") == shown for v in viewers),
        what=f"{shown} calls on every tab",
    )
    info = await bot.redis.info("stats")
    publishes = len(bot.slack.calls_to("views.publish")) - before
    return (int(info["total_commands_processed"]) - start_commands) / publishes


async def publish_costs(bot: Harness, viewers: list[str]) -> tuple[float, float]:
    """Redis commands per publish, once every viewer's tab shows 1 call, then 14."""
    bot.model.script = by_task
    for user in viewers:
        await open_home(bot, user)
    few = await commands_per_publish(bot, viewers, 1)
    for _ in range(12):
        await start(bot, "delete u-100", "CGENERAL")
    await bot.slack.wait_for(
        lambda: all(home_text(bot, v).count("wants to run") == 13 for v in viewers),
        what="13 calls on every tab",
    )
    return few, await commands_per_publish(bot, viewers, 14)


async def test_commands_per_publish_do_not_grow_with_the_open_approvals(bot: Harness) -> None:
    viewers = [f"UM{n}" for n in range(8)]
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": viewers}
    few, many = await publish_costs(bot, viewers)
    # Each publish reading every open approval cost about 5 commands more per approval.
    assert many < few + 15, (few, many)


async def commands_to_open(bot: Harness, user: str) -> tuple[int, int]:
    """Redis commands (everyone's), and of them reads of a record (`HMGET`), from `user`
    opening their tab to its publish."""
    info: Any = await bot.redis.info("commandstats")
    await open_home(bot, user)
    after: Any = await bot.redis.info("commandstats")
    spent = {
        name: stat["calls"] - info.get(name, {"calls": 0})["calls"] for name, stat in after.items()
    }
    return sum(spent.values()) - 1, spent.get("cmdstat_hmget", 0)


async def least_to_open(bot: Harness, people: list[str]) -> tuple[int, int]:
    """The least commands and, apart, the least record reads of their openings, once the runs
    just started stopped reading records (posting their cards and status): the worker's own
    polling comes and goes meanwhile, and a loaded machine draws out what a start still does."""
    reads, deadline = -1, time.monotonic() + 5
    while time.monotonic() < deadline:
        info: Any = await bot.redis.info("commandstats")
        if (now := info.get("cmdstat_hmget", {"calls": 0})["calls"]) == reads:
            break
        reads = now
        await asyncio.sleep(0.5)
    found = [await commands_to_open(bot, person) for person in people]
    return min(spent for spent, _ in found), min(read for _, read in found)


@pytest.fixture
async def counted_bot(
    own_redis: RedisServer, prefix: str, env_overrides: dict[str, str]
) -> AsyncIterator[Harness]:
    """The bot on a Redis of its own, whose command count is the test's alone."""
    harness = Harness(redis_url=own_redis.url, prefix=prefix, env=env_overrides)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def test_a_tab_opened_alone_reads_what_it_shows_not_everything_that_waits(
    counted_bot: Harness,
) -> None:
    bot, sre = counted_bot, [f"UM{n}" for n in range(7)]
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": sre}
    bot.model.script = by_task
    await open_home(bot, sre[0])  # the watch starts following changes
    for _ in range(2):
        await start(bot, "delete u-100", "CGENERAL")  # @sre's to decide
    few = await least_to_open(bot, sre[1:4])
    for _ in range(18):
        await start(bot, "restart api", "COPS")  # Carol's: none of @sre's business
    many = await least_to_open(bot, sre[4:7])
    assert home_text(bot, sre[6]).count("wants to run") == 2
    # Reading every open approval and live run cost 3 record reads more per approval waiting.
    assert many[1] <= few[1] and many[0] < few[0] + 8, (few, many)
