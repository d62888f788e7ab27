"""A click's copy that reaches Redis after its run finished (redis-py sends a timed-out call
again; the first copy decided, the resume ran and closed the run): the decision script keeps its
reply in the run's hash, gone with it, so the copy answers from the run's tombstone, and the
clicker is told the run has finished, never that nothing was recorded."""

from __future__ import annotations

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
from tests.runtime.grants.test_once_scripts import waiting_call


class Resending(aioredis.Redis):
    """A client that keeps the last script call it sent, to send that very call again as
    redis-py does after a timeout."""

    sent: tuple[Any, ...] = ()

    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:  # type: ignore[override]
        self.sent = (sha, numkeys, *keys_and_args)
        return super().evalsha(sha, numkeys, *keys_and_args)


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[Resending]:
    found = Resending.from_url(redis_url)
    yield found
    await found.aclose()


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
    call = await waiting_call(store, run_id)
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
