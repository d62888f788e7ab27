"""Scoped grants: "Approve and allow…" on a card lets later calls like it run without a card, in
that channel, for a while; checked at each call against the policy; revocable; ending on time."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from bot.console.slack_payloads import ephemeral_click
from tests.conftest import on_cluster_too, with_env
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


def delete(user_id: str) -> Any:
    """Ask to delete `user_id`; once told the outcome, answer `done: <it>`."""

    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": user_id}, "call_del")]
        return [message("done: " + request.tool_outputs["call_del"])]

    return script


def grant_options(card: Message) -> dict[str, str]:
    """The card's grant menu: option text -> value."""
    menus = [b["accessory"] for b in card.blocks if b.get("block_id") == "grant_menu"]
    if not menus:
        return {}
    return {o["text"]["text"]: o["value"] for o in menus[0]["options"]}


async def run_in(bot: Harness, text: str, channel: str = "CGENERAL") -> Message:
    roots = len(bot.slack.roots())
    status, _ = await bot.sender.command(text, channel=channel)
    assert status == 200
    await bot.slack.wait_for(lambda: len(bot.slack.roots()) > roots, what="root message")
    return bot.slack.roots()[-1]


def grant_lines(bot: Harness, root: Message) -> list[Message]:
    return [m for m in bot.slack.thread(root.channel, root.ts) if "'s grant" in m.text]


async def granted(bot: Harness, option: str, *, by: str = "UBOB") -> tuple[Message, str]:
    """A first run whose card `by` approves with the grant `option`; returns its card and the
    grant's id."""
    bot.slack.channels["CGENERAL"] = "general"
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.choose_grant(card, grant_options(card)[option], user=by)
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    trail = await bot.audit_until("granted")
    [entry] = [e for e in trail if e["event"] == "granted"]
    return card, str(entry["grant_id"])


@on_cluster_too
async def test_a_channel_grant_lets_the_next_run_skip_the_card_until_revoked(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    bot.slack.channels["CGENERAL"] = "general"
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert list(grant_options(card)) == [
        "delete_user in #general for 1 hour",
        "delete_user in #general for 8 hours",
        "these exact arguments for 24 hours",
    ]
    hour = grant_options(card)["delete_user in #general for 1 hour"]
    await bot.sender.choose_grant(card, hour, user="UBOB")
    assert (await bot.final_answer(root)).text == "done: deleted u-100"
    await bot.slack.wait_for(lambda: "Also allowed" in card.all_text(), what="grant on the card")

    # The next run in this channel: no card, one quiet line saying whose grant, and it ran.
    second = await run_in(bot, "delete u-100 again")
    assert (await bot.final_answer(second)).text == "done: deleted u-100"
    [line] = grant_lines(bot, second)
    assert line.text.startswith("`delete_user` approved by <@UBOB>'s grant (until <!date^")
    assert line.action_ids() == ["revoke_grant"]
    assert [c for c in bot.slack.cards() if c.thread_ts == second.ts] == []
    assert [tool for tool, _ in agents.EXECUTIONS] == ["delete_user", "delete_user"]
    trail = await bot.audit_until("grant_used")
    [granted_entry] = [e for e in trail if e["event"] == "granted"]
    [used] = [e for e in trail if e["event"] == "grant_used"]
    assert used["grant_id"] == granted_entry["grant_id"] and used["user_id"] == "UBOB"

    # Another channel still asks.
    elsewhere = await run_in(bot, "delete u-100", channel="COTHER")
    await bot.cards(elsewhere, 1)

    # `/agent grants` lists it, with who, until and how often it was used.
    status, listing = await bot.sender.command("grants")
    assert status == 200
    shown = json.dumps(listing["blocks"])
    assert "`delete_user` of *ops*, granted by <@UBOB>" in shown and "used once" in shown

    # Revoke on the quiet line: the very next call asks again.
    await bot.sender.click(line, "revoke_grant", user="UCAROL")
    await bot.audit_until("revoked")
    await bot.slack.wait_for(lambda: "revoked by <@UCAROL>" in line.text, what="line redrawn")
    third = await run_in(bot, "delete u-100 once more")
    await bot.cards(third, 1)
    status, listing = await bot.sender.command("grants")
    assert listing["text"].startswith("No grants are active in this channel.")


async def test_a_revoke_from_the_list_redraws_the_list_and_every_line_of_the_grant(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour")
    lines = []
    for task in ("delete u-100 again", "delete u-100 once more"):
        root = await run_in(bot, task)
        await bot.final_answer(root)
        lines += grant_lines(bot, root)
    assert [line.action_ids() for line in lines] == [["revoke_grant"], ["revoke_grant"]]

    _, listing = await bot.sender.command("grants")
    [revoke] = [block["accessory"] for block in listing["blocks"] if "accessory" in block]
    payload = ephemeral_click(
        channel="CGENERAL",
        message_ts="1700000000.000900",
        action={**revoke, "block_id": "grant_list"},
        user=bot.sender.user("UCAROL"),
        response_url=bot.slack.response_url("UCAROL"),
        trigger_id="t1",
    )
    await bot.sender.interact(payload)
    await bot.audit_until("revoked")
    redrawn = await bot.slack.wait_for(
        lambda: [r for r in bot.slack.responses if r.get("replace_original")], what="the list"
    )
    assert redrawn[0]["text"].startswith("No grants are active in this channel.")
    assert not redrawn[0].get("blocks"), "no Revoke left to press"
    await bot.slack.wait_for(
        lambda: all(line.action_ids() == [] for line in lines), what="both lines redrawn"
    )
    assert all("revoked by <@UCAROL>" in line.text for line in lines)


async def test_a_grant_ends_on_time(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    _card, grant_id = await granted(bot, "delete_user in #general for 1 hour")
    # Let the hour pass: the grant now ends in a second (its stored end and its key's expiry).
    key = bot.keys.grants.grant(grant_id)
    stored = json.loads(await bot.field(key, "grant"))
    seconds, micros = await bot.redis.time()
    stored["ends_at"] = seconds + micros / 1e6 + 1
    await bot.redis.hset(key, "grant", json.dumps(stored))
    await bot.redis.expire(key, 1)
    await gone(bot, key)
    root = await run_in(bot, "delete u-100 later")
    await bot.cards(root, 1)


async def test_an_argument_grant_covers_only_the_same_arguments(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    await granted(bot, "these exact arguments for 24 hours")
    same = await run_in(bot, "delete u-100 again")
    assert (await bot.final_answer(same)).text == "done: deleted u-100"
    assert len(grant_lines(bot, same)) == 1

    bot.model.script = delete("u-101")
    other = await run_in(bot, "delete u-101")
    await bot.cards(other, 1)
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})] * 2


QUORUM_POLICY = """
[[rule]]
tool = "delete_*"
quorum = 2
"""

NO_GRANTS_POLICY = """
[[rule]]
tool = "delete_*"
grant_max_seconds = 0
"""


async def restart_worker_with(bot: Harness, **env: str) -> None:
    await bot.stop_workers()
    await bot.start_worker(**env)


async def test_grants_are_refused_under_a_quorum_and_where_the_policy_allows_none(
    bot: Harness, tmp_path: Path
) -> None:
    bot.model.script = delete_then_answer
    for name, policy in (("quorum", QUORUM_POLICY), ("none", NO_GRANTS_POLICY)):
        path = tmp_path / f"{name}.toml"
        path.write_text(policy)
        await restart_worker_with(bot, POLICY_FILE=str(path))
        root = await bot.start_run(f"delete u-100 ({name})")
        [card] = await bot.cards(root, 1)
        assert grant_options(card) == {}, "no menu"
        run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
        await bot.sender.choose_grant(card, f"{run_id}:{approval_id}:tool:3600", user="UBOB")
        note = await bot.slack.wait_for(
            lambda: [e for e in bot.slack.ephemerals if "not offered" in str(e["text"])]
        )
        assert "That grant is not offered for this call" in str(note[-1]["text"])
        bot.slack.ephemerals.clear()
        assert await bot.redis.hget(bot.keys.run(run_id), f"decision:{approval_id}") is None
    assert [k for k in await bot.keys_left() if ":grant" in k] == []
    assert agents.EXECUTIONS == []


@with_env(GRANT_MAX_SECONDS="3600")
async def test_the_card_offers_only_grants_the_setting_allows(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    bot.slack.channels["CGENERAL"] = "general"
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    assert list(grant_options(card)) == ["delete_user in #general for 1 hour"]
    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    await bot.sender.choose_grant(card, f"{run_id}:{approval_id}:tool:28800", user="UBOB")
    await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if "not offered" in str(e["text"])]
    )


async def test_a_grant_is_checked_against_the_policy_at_each_call(
    bot: Harness, tmp_path: Path
) -> None:
    """Made while grants were allowed; the rule now wants a quorum: the call asks."""
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour")
    path = tmp_path / "quorum.toml"
    path.write_text(QUORUM_POLICY)
    await restart_worker_with(bot, POLICY_FILE=str(path))
    root = await run_in(bot, "delete u-100 again")
    await bot.cards(root, 1)
    assert grant_lines(bot, root) == []


@with_env(APPROVERS="UBOB,UCAROL")
async def test_a_granter_removed_from_the_approvers_no_longer_covers_calls(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour", by="UBOB")
    await restart_worker_with(bot, APPROVERS="UCAROL")
    root = await run_in(bot, "delete u-100 again")
    await bot.cards(root, 1)
    assert grant_lines(bot, root) == []
    assert len(agents.EXECUTIONS) == 1


@with_env(APPROVERS="S0SRE")
async def test_a_grant_by_a_group_member_covers_calls_while_they_are_in_it(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UBOB"]}
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour", by="UBOB")
    covered = await run_in(bot, "delete u-100 again")
    assert len(grant_lines(bot, await wait_answer(bot, covered))) == 1

    bot.slack.groups["S0SRE"]["users"].remove("UBOB")
    await bot.sender.event(
        {"type": "subteam_members_changed", "subteam_id": "S0SRE", "team_id": "T0001"}
    )
    await gone(bot, bot.keys.slack.group_members("S0SRE"))
    asked = await run_in(bot, "delete u-100 once more")
    await bot.cards(asked, 1)


async def gone(bot: Harness, key: str, timeout: float = 5) -> None:
    """Wait until Redis no longer has `key` (expired or deleted): the settled signal."""
    deadline = time.monotonic() + timeout
    while await bot.redis.exists(key):
        assert time.monotonic() < deadline, f"{key} still exists"
        await asyncio.sleep(0.05)


async def wait_answer(bot: Harness, root: Message) -> Message:
    await bot.final_answer(root)
    return root


async def test_a_grant_does_not_let_its_author_approve_their_own_runs(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    await granted(bot, "delete_user in #general for 1 hour", by="UBOB")
    roots = len(bot.slack.roots())
    await bot.sender.command("delete u-100 myself", user="UBOB")
    await bot.slack.wait_for(lambda: len(bot.slack.roots()) > roots, what="root message")
    root = bot.slack.roots()[-1]
    await bot.cards(root, 1)
    assert grant_lines(bot, root) == []
