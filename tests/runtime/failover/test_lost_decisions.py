"""What a Redis failover loses of what people were told, found and said (`REDIS_MIN_REPLICAS=0`).

A decision acknowledged ("Approved by …") on a primary that dies before its replica received it
is gone from the promoted replica: the run waits there again. The web process finds it once the
primary changed (`runtime.failover.decisions`): the card comes back with its buttons and a line
saying whose decision was lost, and the person is told privately. The worker that ran the
approved tool meanwhile still holds its output and writes it back (`runtime.failover.calls`), so
the approval made again reuses it: the tool runs once. A decision the replica did receive is
left alone.

And, found while looking at why a failover test's click sometimes got no answer: a card whose
message id was lost with the primary is posted again by the job's retry, so its call has two
cards in the thread; a click on the first one must show the decision there too.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.words import failovers as lost_words
from bot.words import runs as messages
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelRequest, Reply, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.processes import wait_for_log
from tests.support.replicated_redis import ReplicatedRedis


@pytest.fixture
async def replicated(tmp_path: Path) -> AsyncIterator[ReplicatedRedis]:
    servers = ReplicatedRedis(tmp_path / "redis")
    await servers.start()
    try:
        yield servers
    finally:
        await servers.stop()


def restart(request: ModelRequest) -> Reply:
    """`restart <service>`: one call of `restart_service`, then the answer."""
    service = request.task.rsplit(" ", 1)[1]
    call_id = f"call_{service}"
    if call_id not in request.tool_outputs:
        return [tool_call("restart_service", {"service": service}, call_id)]
    return [message(f"done: {request.tool_outputs[call_id]}")]


async def started(deployment: Deployment, task: str) -> Message:
    status, body = await deployment.sender.command(task, trigger_id=f"trigger-{task}")
    assert (status, body.get("text")) == (200, messages.command_starting("ops"))
    slack = deployment.slack

    def roots() -> list[Message]:
        return [m for m in slack.roots() if m.text.endswith(f"*ops*: {task}")]

    [root] = await slack.wait_for(roots, 20, f"the thread of {task}")
    cards: list[Message] = await slack.wait_for(
        lambda: [c for c in slack.cards() if c.thread_ts == root.ts], 20, f"the card of {task}"
    )
    return cards[0]


async def approved(deployment: Deployment, card: Message, user: str, answers: int = 1) -> None:
    """`user` approves; the card says so, and the run answers (its `answers`-th answer)."""
    slack = deployment.slack
    status, _ = await deployment.sender.click(card, "approve", user=user)
    assert status == 200
    await slack.wait_for(lambda: "approve" not in card.action_ids(), 10, "the card redrawn")
    thread = card.thread_ts or ""
    await slack.wait_for(lambda: len(slack.final_answers(thread)) >= answers, 30, "the answer")


async def fail_over(redis: ReplicatedRedis) -> None:
    """The primary dies with what the link held; the replica is promoted; the old one rejoins
    as its replica."""
    redis.kill_primary()
    await redis.proxy.drop()
    await redis.wait_for_failover()
    redis.restart_old_primary()


async def ran(deployment: Deployment) -> list[str]:
    ledger: Any = await deployment.redis.lrange(deployment.ledger_key, 0, -1)
    return [json.loads(entry)["call_id"] for entry in ledger]


async def test_a_decision_lost_in_a_failover_comes_back_and_its_tool_runs_once(
    deployment: Deployment, replicated: ReplicatedRedis
) -> None:
    env = {**replicated.environ(0), "REMINDER_AT": "0", "JOB_MAX_DELIVERIES": "20"}
    deployment.model.script = restart
    web = await deployment.web(**env)
    worker = deployment.worker("worker.1", **env)
    await wait_for_log(worker, "worker ready", timeout=60)
    slack = deployment.slack

    kept, lost = await started(deployment, "restart db"), await started(deployment, "restart api")
    await approved(deployment, kept, "UCAROL")
    await replicated.caught_up()  # both runs, and carol's decision, are on the replica
    replicated.proxy.hold()  # from here on the replica hears nothing
    await approved(deployment, lost, "UBOB")  # on the primary only; the tool runs there
    assert await ran(deployment) == ["call_db", "call_api"]
    await fail_over(replicated)

    # Bob's approval died with the primary: his card asks again, and he is told why.
    await slack.wait_for(lambda: "approve" in lost.action_ids(), 20, "the card back")
    assert lost_words.lost_line("UBOB", "approved") in lost.all_text()
    [note] = await slack.wait_for(
        lambda: [e for e in slack.ephemerals if e["user"] == "UBOB"], 10, "a note to bob"
    )
    assert note["text"] == lost_words.lost_note("restart_service", "approved")
    # Carol's, which the replica had, stands.
    assert "approve" not in kept.action_ids()
    assert [e for e in slack.ephemerals if e["user"] == "UCAROL"] == []

    # Approved again: the run goes on from the tool's output the worker wrote back.
    await approved(deployment, lost, "UBOB", answers=2)
    assert await ran(deployment) == ["call_db", "call_api"], "no tool ran twice"
    assert "restarted api" in slack.final_answers(lost.thread_ts or "")[-1].text
    for process in (web, worker):
        assert "REDIS_MIN_REPLICAS=0 with a replicated Redis" in process.log_path.read_text()


async def test_a_click_on_a_card_posted_twice_shows_the_decision_on_both(bot: Harness) -> None:
    """The record names the second card (the first one's id was lost with a primary): a click
    on the first redraws it too, not only the one the record names."""
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [first] = await bot.cards(root, 1)
    again = {"channel": first.channel, "thread_ts": root.ts, "text": first.text}
    posted = bot.slack.answer("chat.postMessage", {**again, "blocks": first.blocks})
    second = bot.slack.messages[posted["ts"]]
    run_id, approval_id = str(first.actions()[0]["value"]).split(":")[:2]
    await bot.redis.hset(bot.keys.run(run_id), f"ts:{approval_id}", second.ts)

    status, _ = await bot.sender.click(first, "approve", user="UBOB")
    assert status == 200
    for card in (first, second):

        def redrawn(card: Message = card) -> bool:
            return "<@UBOB> approved" in card.all_text()

        await bot.slack.wait_for(redrawn, 10, f"card {card.ts} redrawn")
    await bot.final_answer(root)
