"""Approvals nobody decides in time: the card says so, the agent is told, the thread answered."""

from __future__ import annotations

import asyncio
import time

import pytest

from runtime.calls.digest import call_digest
from runtime.db.keys import Keys
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.store import RunStore
from tests.conftest import on_cluster_too
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.time_passing import pass_time


@pytest.fixture
def env_overrides() -> dict[str, str]:
    return {"APPROVAL_TTL_SECONDS": "1"}


@on_cluster_too
async def test_an_undecided_approval_expires_and_the_run_wraps_up(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    stale = bot.sender.click_payload(card, "approve", user="ULATE")  # a screen not refreshed

    answer = await bot.final_answer(root, timeout=15)
    assert "no one approved or rejected it in time" in answer.text
    assert card.actions() == []
    assert "Expired" in card.all_text() and "no decision came in time" in card.all_text()
    assert agents.EXECUTIONS == []

    status, _ = await bot.sender.interact(stale)
    assert status == 200
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert "not open" in note[0]["text"] or "expired" in note[0]["text"]
    assert agents.EXECUTIONS == []


async def test_a_click_after_the_deadline_but_before_the_sweep_says_expired(
    bot: Harness,
) -> None:
    bot.model.script = delete_then_answer
    await bot.stop_workers()  # no sweeper: the approval stays past its deadline
    root_count = len(bot.slack.roots())
    await bot.sender.command("delete u-100")
    await bot.start_worker()
    await bot.slack.wait_for(lambda: len(bot.slack.roots()) > root_count, what="root")
    root = bot.slack.roots()[-1]
    [card] = await bot.cards(root, 1)
    await bot.stop_workers()
    await pass_time(bot.redis, bot.keys, card, seconds=1.2)

    await bot.sender.click(card, "approve", user="UBOB")
    note = await bot.slack.wait_for(lambda: bot.slack.ephemerals, what="ephemeral")
    assert note[0]["text"].startswith("This approval expired")

    await bot.start_worker()  # a restarted worker still finds and handles the expiry
    answer = await bot.final_answer(root, timeout=15)
    assert "in time" in answer.text
    assert agents.EXECUTIONS == []


@on_cluster_too
async def test_several_workers_expire_each_approval_exactly_once(bot: Harness) -> None:
    def five_calls(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": f"u-{n}"}, f"c{n}") for n in range(5)]
        return [message(f"{len(request.tool_outputs)} expired")]

    bot.model.script = five_calls
    await bot.start_worker("second")
    await bot.start_worker("third")
    root = await bot.start_run("delete five")
    cards = await bot.cards(root, 5)
    answer = await bot.final_answer(root, timeout=15)
    assert answer.text == "5 expired"
    assert [c.updates for c in cards] == [1] * 5
    audit = await bot.audit_entries()
    assert [entry[b"event"] for entry in audit].count(b"expired") == 5


async def test_a_decision_and_an_expiry_racing_resolve_to_exactly_one_outcome(
    redis_url: str, prefix: str
) -> None:
    from runtime.db.connection import connect

    redis = connect(redis_url)
    keys = Keys(prefix)
    store, recorder = RunStore(redis, keys), DecisionRecorder(redis, keys)
    try:
        for _round in range(20):
            run_id = new_run_id()
            envelope = RunEnvelope(
                run_id=run_id,
                root_agent="ops",
                task="t",
                created_at=time.time(),
                conversation=Conversation(channel="C1", requester="U1", thread="1.1"),
            )
            await store.create(envelope)
            lease = (await store.claim(envelope.run_id, kind="start", round_=0)).lease
            assert lease is not None
            deadline = await store.server_time() + 0.02
            call = PendingCall(
                approval_id=new_approval_id(),
                call_id="c",
                tool="delete_user",
                agent="ops",
                arguments="{}",
                expires_at=deadline,
                digest=call_digest("delete_user", "{}"),
            )
            waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
            await store.wait_for_approvals(
                waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=False
            )

            async def click(
                n: int,
                run_id: str = run_id,
                approval_id: str = call.approval_id,
                digest: str = call.digest,
            ) -> str:
                await asyncio.sleep(n * 0.001)
                choice = Choice(outcome="approved", user_id=f"U{n}")
                view = await recorder.view(run_id, approval_id)
                decided = await recorder.decide(
                    view, choice, channel="C1", member_of=(), seen=digest
                )
                return decided.status

            async def expire(
                n: int, run_id: str = run_id, approval_id: str = call.approval_id
            ) -> str:
                await asyncio.sleep(n * 0.001)
                view = await recorder.view(run_id, approval_id)
                return (await recorder.expire(view)).status

            results = await asyncio.gather(
                *(click(n) for n in range(40)), *(expire(n) for n in range(40))
            )
            assert results.count("recorded") == 1, results
            record = await store.load(run_id)
            assert record is not None and record.status == "ready"
            winner = record.envelope.calls[0].decision
            assert winner is not None
            clicks_won = results[:40].count("recorded")
            assert (winner.outcome == "approved") == (clicks_won == 1)
            assert await redis.xlen(keys.jobs) == _round + 1, "one resume job per run"
    finally:
        await redis.aclose()


async def test_a_card_slack_no_longer_has_is_posted_again_with_one_warning(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    [status] = bot.slack.status_messages(root.ts)
    # A console restarted without them: Slack answers message_not_found to their updates.
    del bot.slack.messages[card.ts], bot.slack.messages[status.ts]

    answer = await bot.final_answer(root, timeout=15)
    assert "no one approved or rejected it in time" in answer.text
    [again] = [m for m in bot.slack.cards() if m.thread_ts == root.ts]
    assert again.ts != card.ts
    assert again.text == ":hourglass: Expired, did not run"
    [status_again] = bot.slack.status_messages(root.ts)
    assert status_again.text.startswith(":no_entry_sign: Nothing ran: `delete_user` expired")
    gone = [r for r in caplog.records if "gone from Slack (message_not_found)" in r.getMessage()]
    assert [r.levelname for r in gone] == ["WARNING", "WARNING"], "one line each, card and status"
    assert not any(r.exc_info for r in gone), "a warning, not a traceback"
    assert agents.EXECUTIONS == []
