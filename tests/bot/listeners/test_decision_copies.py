"""Copies of a click (redis-py sends a timed-out call again; the first copy ran): the decision
script keeps its reply in the run's hash. A copy of an Approve always answers the whole reply,
with the calls it covered. A copy that reaches Redis after its run finished (the resume ran and
closed the run, the reply gone with the hash) answers from the run's tombstone, and the clicker
is told the run has finished, never that nothing was recorded."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners.gate import ApprovalGate, GateAnswer
from bot.slack.directory import ApproverDirectory
from bot.slack.members import WorkspaceMembers
from runtime.db.keys import Keys
from runtime.decisions.recorder import Choice, DecisionRecorder, result_of
from runtime.jobs.contracts import new_run_id
from runtime.record.store import RunStore
from tests.runtime.grants.test_once_scripts import waiting_calls


class Resending(aioredis.Redis):
    """A client that keeps the last script call it sent, to send that very call again as
    redis-py does after a timeout."""

    sent: tuple[Any, ...] = ()

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        self.sent = (sha, numkeys, *keys_and_args)
        return super().evalsha(sha, numkeys, *keys_and_args)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Resending]:
    pool = aioredis.ConnectionPool.from_url(redis_url)
    found = Resending(connection_pool=pool)
    yield found
    await found.aclose()
    await pool.aclose()


def gate_of(client: aioredis.Redis, keys: Keys, recorder: DecisionRecorder) -> ApprovalGate:
    slack = AsyncWebClient(token="xoxb-unused", base_url="http://127.0.0.1:9/")  # never asked
    return ApprovalGate(
        directory=ApproverDirectory(client, keys, slack),
        recorder=recorder,
        members=WorkspaceMembers(client, keys, slack),
    )


async def test_a_copy_of_a_decision_after_its_run_finished_is_told_the_run_finished(
    client: Resending, prefix: str
) -> None:
    keys = Keys(prefix)
    store, recorder = RunStore(client, keys), DecisionRecorder(client, keys)
    run_id = new_run_id()
    [call] = await waiting_calls(store, run_id)
    view = await recorder.view(run_id, call.approval_id)
    approve = Choice(outcome="approved", user_id="UANN")
    first = await recorder.decide(view, approve, channel="COPS", member_of=(), seen=call.digest)
    assert first.status == "recorded" and first.resume_enqueued
    sent = client.sent
    await store.close(run_id, lease=None, outcome="finished")  # resumed, ran, and finished
    audit = keys.shard_of(run_id).audit
    entries = await client.xlen(audit)

    copy: Any = await client.evalsha(*sent)
    late = result_of([p.decode() for p in copy])

    assert late.status == "finished"
    assert await client.xlen(audit) == entries, "the copy recorded nothing more"
    gate = gate_of(client, keys, recorder)
    told = await gate.explanation(GateAnswer(view=view, result=late))
    assert "already finished" in told and "card shows" in told
    assert "Nothing was recorded" not in told, "the clicker's approval was recorded"

    # A click the web sent after the run was gone (it read no run first) did record nothing.
    gone = await recorder.view(run_id, call.approval_id)
    fresh = await recorder.decide(gone, approve, channel="COPS", member_of=(), seen=call.digest)
    assert not gone.exists and fresh.status == "finished"
    assert "Nothing was recorded" in await gate.explanation(GateAnswer(view=gone, result=fresh))


async def test_a_copy_of_an_approve_always_answers_the_calls_it_covered(
    client: Resending, prefix: str
) -> None:
    keys = Keys(prefix)
    store, recorder = RunStore(client, keys), DecisionRecorder(client, keys)
    run_id = new_run_id()
    clicked, other = await waiting_calls(store, run_id, 2)
    rule = "delete_user|ops|rule|1"  # both calls fall under one rule (`rules`: its key per call)
    await client.hset(
        keys.run(run_id), "rules", json.dumps({clicked.approval_id: rule, other.approval_id: rule})
    )
    view = await recorder.view(run_id, clicked.approval_id)
    always = Choice(outcome="approved_always", user_id="UANN")
    first = await recorder.decide(view, always, channel="COPS", member_of=(), seen=clicked.digest)
    assert first.status == "recorded" and first.resume_enqueued
    assert [aid for aid, _ in first.covered] == [other.approval_id]
    audit, jobs = keys.shard_of(run_id).audit, keys.shard_of(run_id).jobs
    entries, queued = await client.xlen(audit), await client.xlen(jobs)

    copy: Any = await client.evalsha(*client.sent)
    again = result_of([p.decode() for p in copy])

    assert again == first, "the whole reply: the clicked call's decision and the covered call's"
    assert (await client.xlen(audit), await client.xlen(jobs)) == (entries, queued)
