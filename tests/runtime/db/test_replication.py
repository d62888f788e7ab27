"""`REDIS_MIN_REPLICAS`: nothing is acknowledged before the replicas have it, and a click the
replicas did not confirm in time is answered "click again", after which the same click
approves, exactly once. Sentinel settings that cannot work say which variable to fix."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from bot.settings import SettingsError, load_settings
from bot.words import runs as messages
from runtime.db.client import connect_to
from runtime.db.connection import wait_until_reachable
from runtime.db.keys import Keys
from runtime.db.local import free_port
from runtime.db.replication import Replication
from runtime.process.shutdown import Shutdown
from tests.support import agents
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.replicated_redis import ReplicatedRedis

REQUIRED = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"}


@pytest.fixture
async def replicated(tmp_path: Path) -> AsyncIterator[ReplicatedRedis]:
    """A primary and its replica (no Sentinels): the link between them can be held back."""
    servers = ReplicatedRedis(tmp_path / "redis")
    await servers.start(sentinels=False)
    try:
        yield servers
    finally:
        await servers.stop()


@pytest.fixture
async def waiting_for_replicas(
    replicated: ReplicatedRedis, request: pytest.FixtureRequest
) -> AsyncIterator[Harness]:
    """`request.param`, if given: more settings."""
    agents.EXECUTIONS.clear()
    harness = Harness(
        redis_url=replicated.primary_url,
        prefix="csrepl:",
        # Long enough that a machine busy with other tests still relays a GETACK in time.
        env={"REDIS_MIN_REPLICAS": "1", "REDIS_WAIT_MS": "1000", **getattr(request, "param", {})},
    )
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def approved_while_the_replica_lags(
    bot: Harness, replicated: ReplicatedRedis
) -> tuple[Message, Message]:
    """A run's card approved by UBOB while the replica is held back: the run's root and card,
    after UBOB was told to click again. The replica is still held."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    replicated.proxy.hold()  # the replica falls behind: WAIT times out
    status, _ = await bot.sender.click(card, "approve", user="UBOB")
    assert status == 200
    [note] = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="try again")
    assert note["user"] == "UBOB"
    assert note["text"] == messages.NOT_CONFIRMED
    assert "approve" in card.action_ids(), "the card keeps its buttons"
    assert agents.EXECUTIONS == [], "nothing runs on a decision the replica lacks"
    return root, card


async def test_a_click_the_replica_did_not_confirm_is_clicked_again_and_counts_once(
    waiting_for_replicas: Harness, replicated: ReplicatedRedis
) -> None:
    bot = waiting_for_replicas
    root, card = await approved_while_the_replica_lags(bot, replicated)

    replicated.proxy.release()
    status, _ = await bot.sender.click(card, "approve", user="UBOB")
    assert status == 200
    answer = await bot.final_answer(root)
    assert answer.text == "done: deleted u-100"
    assert len(bot.slack.ephemerals) == 1, "the second click is answered OK"
    # The card is redrawn after the ack; the worker may answer first (it resumed on the first
    # click's decision, once the replica had it).
    await bot.slack.wait_for(lambda: "<@UBOB> approved" in card.all_text(), what="redrawn")
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert len([r for r in bot.model.requests if r.tool_outputs]) == 1, "resumed exactly once"
    trail = await bot.audit_until("approved")
    assert [e["user_id"] for e in trail if e["event"] == "approved"] == ["UBOB"]


async def test_a_decision_the_replica_confirms_late_shows_on_the_card_without_a_second_click(
    waiting_for_replicas: Harness, replicated: ReplicatedRedis
) -> None:
    bot = waiting_for_replicas
    root, card = await approved_while_the_replica_lags(bot, replicated)
    replicated.proxy.release()

    await bot.slack.wait_for(lambda: "<@UBOB> approved" in card.all_text(), 20, "redrawn")
    assert card.actions() == []
    answer = await bot.final_answer(root)
    assert answer.text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]
    assert len(bot.slack.ephemerals) == 1


# A job is dead-lettered after its second delivery, and a delivery the worker gives up is
# taken over after 1 s: a replica away for seconds would use them all up.
IMPATIENT = {"JOB_IDLE_TIMEOUT_SECONDS": "1", "JOB_MAX_DELIVERIES": "2"}


@pytest.mark.parametrize("waiting_for_replicas", [IMPATIENT], indirect=True)
async def test_a_worker_waits_out_a_replica_outage_instead_of_giving_the_run_up(
    waiting_for_replicas: Harness, replicated: ReplicatedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    bot = waiting_for_replicas
    root, _card = await approved_while_the_replica_lags(bot, replicated)
    # The decision reached the primary, and its resume job with it: the worker resumes, and
    # the tool may not run before the replica has the decision.
    await asyncio.sleep(7)  # the replica stays away for several idle timeouts
    assert agents.EXECUTIONS == [], "nothing ran on a decision the replica lacks"
    assert not bot.slack.final_answers(root.ts), "nothing said while it waits"

    replicated.proxy.release()
    answer = await bot.final_answer(root)
    assert answer.text == "done: deleted u-100"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})], "it ran once"
    assert await bot.redis.xlen(bot.keys.dead_jobs) == 0
    assert "Redis is away" in caplog.text and "check REDIS_MIN_REPLICAS" in caplog.text


async def test_a_run_started_while_the_replica_lags_says_so_and_starts_once(
    waiting_for_replicas: Harness, replicated: ReplicatedRedis
) -> None:
    bot = waiting_for_replicas
    bot.model.script = delete_then_answer
    replicated.proxy.hold()
    status, body = await bot.sender.command("delete u-100", trigger_id="trigger-lag")
    assert status == 200
    assert body["text"] == messages.RUN_NOT_CONFIRMED
    replicated.proxy.release()
    await replicated.caught_up()
    # Slack resends the same command (same trigger): the same run, now confirmed.
    status, body = await bot.sender.command("delete u-100", trigger_id="trigger-lag")
    assert body["text"] == messages.command_starting("ops")
    await bot.slack.wait_for(lambda: bot.slack.roots(), 20, "the run's thread")
    [root] = bot.slack.roots()
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    assert len(bot.slack.roots()) == 1
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


async def test_no_replicas_asked_sends_no_command() -> None:
    nowhere = aioredis.Redis(port=free_port(), socket_connect_timeout=0.2)
    try:
        await Replication.of(nowhere, Keys("x:"), min_replicas=0, wait_ms=10).confirm()
        with pytest.raises(RedisError):  # with replicas asked, it does ask
            await Replication.of(nowhere, Keys("x:"), min_replicas=1, wait_ms=10).confirm()
    finally:
        await nowhere.aclose()


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"REDIS_SENTINELS": "10.0.0.1:26379"}, "REDIS_SENTINEL_MASTER is not set"),
        ({"REDIS_SENTINELS": "10.0.0.1", "REDIS_SENTINEL_MASTER": "m"}, "REDIS_SENTINELS is"),
        ({"REDIS_MIN_REPLICAS": "-1"}, "REDIS_MIN_REPLICAS is invalid"),
        ({"REDIS_WAIT_MS": "5000"}, "REDIS_WAIT_MS is invalid"),
    ],
    ids=["master-missing", "sentinel-without-port", "negative-replicas", "wait-too-long"],
)
def test_a_bad_replication_setting_names_itself(environ: dict[str, str], expected: str) -> None:
    with pytest.raises(SettingsError) as error:
        load_settings({**REQUIRED, **environ})
    assert expected in str(error.value)


def test_sentinel_settings_are_read() -> None:
    settings = load_settings(
        {**REQUIRED, "REDIS_SENTINELS": "a:26379, b:26380", "REDIS_SENTINEL_MASTER": "prod"}
    )
    assert settings.sentinel_addresses == [("a", 26379), ("b", 26380)]
    assert settings.redis_min_replicas == 0
    assert settings.redis_url_setting == "REDIS_SENTINELS, REDIS_SENTINEL_MASTER"


async def test_sentinels_that_name_no_primary_say_which_settings_to_check(
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = load_settings(
        {
            **REQUIRED,
            "REDIS_SENTINELS": f"127.0.0.1:{free_port()}",
            "REDIS_SENTINEL_MASTER": "prod",
        }
    )
    client = connect_to(settings, socket_timeout=0.5, connect_timeout=0.3, retries=0)
    stopping = Shutdown()
    try:
        with caplog.at_level(logging.WARNING, logger="runtime.db.connection"):
            waiting = asyncio.ensure_future(
                wait_until_reachable(client, setting=settings.redis_url_setting, stopping=stopping)
            )
            await asyncio.sleep(0.5)
            stopping.set()
            assert await waiting is False
    finally:
        await client.aclose()
    [line] = [r.getMessage() for r in caplog.records][:1]
    assert "(REDIS_SENTINELS, REDIS_SENTINEL_MASTER)" in line
    assert "no Sentinel answered with that primary" in line
    assert "\n" not in line
