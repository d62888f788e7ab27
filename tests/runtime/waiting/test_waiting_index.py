"""The Home tab's index of open calls (`runtime.waiting.index`) follows the gates, on a single
Redis and a cluster: a call is listed for whoever its gate names while it waits and forgotten
once decided or stopped, and a gate an earlier version wrote without entries is still decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.db.keys import HOME_GROUPS, HOME_WAITING, LIVE_BY
from tests.conftest import on_cluster_too
from tests.support.harness import Harness, keys_under
from tests.support.model_scripts import delete_then_answer

POLICY = """
[[rule]]
tool = "delete_*"
approvers = ["UBOB", "S0SRE"]
"""


@pytest.fixture
def env_overrides(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    if getattr(request, "param", None) == "anyone":
        return {}
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


async def index(bot: Harness) -> dict[str, list[str]]:
    """Principal -> the calls (`run:approval`) its index sets list, and the groups listed."""
    found: dict[str, list[str]] = {}
    for key in await keys_under(bot.redis, bot.prefix):
        if HOME_WAITING in key:
            members: Any = await bot.redis.zrange(key, 0, -1)
            found[key.split(HOME_WAITING)[1]] = [m.decode() for m in members]
        elif key.endswith(HOME_GROUPS):
            members = await bot.redis.smembers(key)
            found[HOME_GROUPS] = sorted(m.decode() for m in members)
    return found


@on_cluster_too
async def test_a_call_is_indexed_for_its_deciders_while_it_waits_and_not_once_decided(
    bot: Harness,
) -> None:
    bot.slack.groups["S0SRE"] = {"handle": "sre", "users": ["UDAVE"]}
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    ref = ":".join(str(card.actions()[0]["value"]).split(":")[:2])  # run:approval (:digest)
    listed = await index(bot)
    assert listed == {"UBOB": [ref], "S0SRE": [ref], HOME_GROUPS: ["S0SRE"]}, listed
    # One key per person, group and channel: each goes with the runs it names, none stays.
    run_ttl = await bot.redis.pttl(bot.keys.run(ref.split(":")[0]))
    # The wait script gives the run an absolute end and its keys the TTL up to it, counted from
    # its `TIME`; Redis 7.0 counts a `PEXPIRE` from the moment that command runs, so a key may end
    # the few milliseconds the script took after its run (seen once in a CI run: 1 ms).
    drift_ms = 100
    for key in await keys_under(bot.redis, bot.prefix):
        if HOME_WAITING in key or key.endswith(HOME_GROUPS) or LIVE_BY in key:
            assert 0 < run_ttl - 5000 <= await bot.redis.pttl(key) <= run_ttl + drift_ms, key
    await bot.sender.click(card, "approve", user="UDAVE")
    await bot.final_answer(root)
    assert await index(bot) == {}


@pytest.mark.parametrize("env_overrides", ["anyone"], indirect=True)
async def test_a_call_anyone_may_decide_is_indexed_for_its_channel_until_stopped(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    ref = ":".join(str(card.actions()[0]["value"]).split(":")[:2])  # run:approval (:digest)
    assert (await index(bot)).get(root.channel) == [ref]
    status, _ = await bot.sender.command(f"stop {ref.split(':')[0]}", user="UALICE")
    assert status == 200
    await bot.audit_until("stopped")
    assert await index(bot) == {}


async def test_a_gate_without_index_entries_is_not_listed_and_still_decided_on_its_card(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    for key in await keys_under(bot.redis, bot.prefix):
        if HOME_WAITING in key:
            await bot.redis.delete(key)  # as a worker of an earlier version wrote it
    status, _ = await bot.sender.event(
        {"type": "app_home_opened", "user": "UBOB", "channel": "DUBOB", "tab": "home"}
    )
    assert status == 200
    await bot.slack.wait_for(lambda: "UBOB" in bot.slack.home_tabs, what="Bob's tab")
    assert "Nothing waits for you" in str(bot.slack.home_tabs["UBOB"])
    await bot.sender.click(card, "approve", user="UBOB")
    assert (await bot.final_answer(root)).text.startswith("done")
