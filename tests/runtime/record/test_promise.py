"""The promise under faults: a call runs only after a permitted approval of exactly that call, and
it runs once (issue 8, items 1 to 3 and the smaller ones that decide who may decide)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.jobs.contracts import Conversation, StartJob
from runtime.record import layout as rr
from runtime.record.envelope import UnreadableEnvelope
from runtime.record.leases import Fenced
from runtime.record.store import RunStore
from tests.conftest import with_env
from tests.support import agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import ModelError, ModelRequest, message, tool_call
from tests.support.fake_slack import Message
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.test_faults import ledger


def delete_then_failing_model(failures: int) -> Any:
    """Ask to delete u-100; once the tool ran, answer 503 `failures` times, then answer."""
    failed = 0

    def script(request: ModelRequest) -> list[dict[str, object]] | ModelError:
        nonlocal failed
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": "u-100"}, "call_del")]
        if failed < failures:
            failed += 1
            return ModelError(503, "overloaded")
        return [message("done: " + request.tool_outputs["call_del"])]

    return script


async def test_an_approved_tool_runs_once_however_often_the_model_fails_after_it(
    deployment: Deployment,
) -> None:
    # The openai client retries twice per delivery: 7 failures outlast two deliveries' retries.
    deployment.model.script = delete_then_failing_model(7)
    await deployment.web()
    deployment.worker("worker.1", JOB_MAX_DELIVERIES="6")
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")

    answers = await deployment.slack.wait_for(
        lambda: deployment.slack.final_answers(root.ts), 60, "final answer"
    )
    assert answers[0].text == "done: deleted u-100", "the recorded output reached the model"
    assert [entry["tool"] for entry in await ledger(deployment)] == ["delete_user"], (
        deployment.logs_text()
    )
    rows: Any = await deployment.redis.xrange(deployment.keys.audit)
    events = [fields[b"event"].decode() for _, fields in rows]
    assert events.count("executed") == 1
    assert events.count("replayed") >= 1, "a retried delivery reused the recorded output"


async def test_a_run_that_fails_after_a_tool_ran_says_the_tool_ran(
    deployment: Deployment,
) -> None:
    deployment.model.script = delete_then_failing_model(1000)
    await deployment.web()
    deployment.worker("worker.1", JOB_MAX_DELIVERIES="2")
    root = await deployment.start_run("delete u-100")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")

    def ending() -> list[Message]:
        thread = deployment.slack.thread(root.channel, root.ts)
        return [m for m in thread if m.text.startswith(":x:")]

    [note] = await deployment.slack.wait_for(ending, 60, "the failure in the thread")
    assert note.text.startswith(":x: `delete_user` ran; then the run failed:"), note.text
    assert len(await ledger(deployment)) == 1


async def test_a_second_delivery_fences_off_the_first(redis_url: str, prefix: str) -> None:
    """The claim is per delivery, not per job id: the older holder can no longer write."""
    redis = connect(redis_url)
    keys = Keys(prefix)
    store = RunStore(redis, keys)
    try:
        await redis.hset(
            keys.run("r0000000000000001"),
            mapping={rr.ENVELOPE: "{}", rr.STATUS: "ready", rr.ROUND: "1", rr.FENCE: "0"},
        )
        first = await store.claim("r0000000000000001", kind="resume", round_=1)
        again = await store.claim("r0000000000000001", kind="resume", round_=1)
        assert (first.status, again.status) == ("claimed", "taken_over")
        assert first.lease and again.lease and again.lease.fence > first.lease.fence
        with pytest.raises(Fenced):
            await store.mark_finishing(first.lease, "the old holder's answer")
        with pytest.raises(Fenced):
            await store.journal_entry(first.lease, "call_x")  # so it runs no further tool
        await store.mark_finishing(again.lease, "the new holder's answer")
    finally:
        await redis.aclose()


async def test_a_redelivered_start_job_does_not_replay_a_finished_run(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    await bot.sender.click(card, "approve", user="UBOB")
    await bot.final_answer(root)
    trail = await bot.audit_until("finished")
    [started] = [entry for entry in trail if entry["event"] == "started"]
    rows: Any = await bot.redis.xrange(bot.keys.audit, count=1)
    run_id = rows[0][1][b"run_id"].decode()

    conversation = Conversation(channel=started["channel"], requester=started["requester"])
    job = StartJob(
        run_id=run_id, agent="ops", task="delete u-100", conversation=conversation, requested_at=0
    )
    await bot.redis.xadd(bot.keys.jobs, {"job": job.model_dump_json()})
    for _ in range(100):  # acknowledged jobs are deleted from the stream
        if await bot.redis.xlen(bot.keys.jobs) == 0:
            break
        await asyncio.sleep(0.05)
    assert await bot.redis.xlen(bot.keys.jobs) == 0, "taken and acknowledged"
    assert len(bot.slack.roots()) == 1, "no new thread"
    assert len(bot.slack.cards()) == 1, "no new card"
    assert agents.EXECUTIONS == [("delete_user", {"user_id": "u-100"})]


async def waiting_card(bot: Harness) -> tuple[Message, Message, str]:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    return root, card, f"{run_id}:{approval_id}"


async def notes_to(bot: Harness, user: str, count: int = 1) -> list[str]:
    found = await bot.slack.wait_for(
        lambda: [e for e in bot.slack.ephemerals if e["user"] == user][count - 1 :],
        what=f"{count} note(s) to {user}",
    )
    return [str(e["text"]) for e in found]


@with_env(APPROVERS="UBOB")
@pytest.mark.parametrize("action", ["approve", "reject"])
async def test_a_record_this_web_cannot_read_still_enforces_who_may_decide(
    bot: Harness, action: str
) -> None:
    """A newer deploy wrote the envelope: the web cannot read it, the script still decides."""
    _root, card, ref = await waiting_card(bot)
    run_id = ref.split(":")[0]
    newer = json.dumps({"schema_version": 99, "run_id": run_id})
    await bot.redis.hset(bot.keys.run(run_id), rr.ENVELOPE, newer)

    await bot.sender.click(card, action, user="UEVE")  # not an approver
    [note] = await notes_to(bot, "UEVE")
    assert note.startswith("Only UBOB may decide `delete_user`"), note
    await bot.audit_until("denied")
    assert await bot.redis.hget(bot.keys.run(run_id), rr.DECISION + ref.split(":")[1]) is None
    assert bot.slack.views == [], "no reject modal for someone who may not decide"
    assert agents.EXECUTIONS == []


@pytest.mark.parametrize("action", ["approve", "reject"])
async def test_a_gate_this_version_cannot_read_refuses_every_click(
    bot: Harness, action: str
) -> None:
    _root, card, ref = await waiting_card(bot)
    run_id, approval_id = ref.split(":")[:2]
    key = bot.keys.run(run_id)
    gate = json.loads(await bot.field(key, rr.GATE + approval_id))
    await bot.redis.hset(key, rr.GATE + approval_id, json.dumps({**gate, "v": 2}))

    await bot.sender.click(card, action, user="UBOB")
    [note] = await notes_to(bot, "UBOB")
    assert "made by a newer version" in note and "try again in a minute" in note
    assert await bot.redis.hget(key, rr.DECISION + approval_id) is None
    assert bot.slack.views == []
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"]


async def test_a_call_without_a_digest_cannot_be_approved(bot: Harness) -> None:
    _root, card, ref = await waiting_card(bot)
    run_id, approval_id = ref.split(":")[:2]
    key = bot.keys.run(run_id)
    gate = json.loads(await bot.field(key, rr.GATE + approval_id))
    await bot.redis.hset(key, rr.GATE + approval_id, json.dumps({**gate, "digest": ""}))
    await bot.sender.click(card, "approve", user="UBOB")
    assert "newer version" in (await notes_to(bot, "UBOB"))[0]
    assert await bot.redis.hget(key, rr.DECISION + approval_id) is None


async def test_approve_always_is_refused_where_it_is_not_offered(bot: Harness) -> None:
    _root, card, ref = await waiting_card(bot)
    run_id, approval_id = ref.split(":")[:2]
    key = bot.keys.run(run_id)
    gate = json.loads(await bot.field(key, rr.GATE + approval_id))
    await bot.redis.hset(key, rr.GATE + approval_id, json.dumps({**gate, "allow_always": False}))
    # A hand-made click on a button the card does not show.
    await bot.sender.click(card, "approve_always", user="UBOB")
    assert "not offered" in (await notes_to(bot, "UBOB"))[0]
    assert await bot.redis.hget(key, rr.DECISION + approval_id) is None


@with_env(APPROVERS="UBOB")
async def test_repeated_refused_clicks_leave_one_denied_entry(bot: Harness) -> None:
    _root, card, _ref = await waiting_card(bot)
    for _ in range(5):
        await bot.sender.click(card, "approve", user="UEVE")
    await notes_to(bot, "UEVE", count=5)
    trail = await bot.audit_until("denied")
    assert [e["event"] for e in trail].count("denied") == 1


async def test_a_decision_from_a_newer_version_reads_as_unreadable_not_a_crash(
    bot: Harness,
) -> None:
    """A newer deploy's field in a stored decision is an unreadable record, which the due-time
    pollers and resumes know how to handle, not a validation error that kills a worker."""
    _root, _card, ref = await waiting_card(bot)
    run_id, approval_id = ref.split(":")[:2]
    newer = json.dumps({"outcome": "approved", "decided_at": 1.0, "weather": "sunny"})
    await bot.redis.hset(bot.keys.run(run_id), rr.DECISION + approval_id, newer)
    store = RunStore(bot.redis, bot.keys)
    with pytest.raises(UnreadableEnvelope):
        await store.load(run_id)
    assert await store.find_call(run_id, approval_id) == (None, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [(rr.TS, b"\xfbW\xea"), (rr.DECISION, b"false"), (rr.DECISION, b"\x80")],
    ids=["ts", "decision", "decision-not-utf8"],
)
async def test_a_field_this_version_cannot_parse_is_refused_not_a_500(
    bot: Harness, field: str, value: bytes
) -> None:
    """Found by the stored-records fuzzer: a card's message ts that is not UTF-8, or a decision
    that is not one (left by another writer), raised while the click was checked, and it was
    answered 500 with a traceback. The click is now refused with a note, as for a gate this
    version cannot read, and nothing is recorded."""
    _root, card, ref = await waiting_card(bot)
    run_id, approval_id = ref.split(":")[:2]
    key = bot.keys.run(run_id)
    await bot.redis.hset(key, field + approval_id, value)
    status, _ = await bot.sender.click(card, "reject", user="UBOB")
    assert status == 200
    [note] = await notes_to(bot, "UBOB")
    assert "recorded" in note or "newer version" in note, note
    assert bot.slack.views == [], "no reject modal for a call nobody may decide here"
    stored = await bot.redis.hget(key, rr.DECISION + approval_id)
    assert stored == (value if field == rr.DECISION else None)
