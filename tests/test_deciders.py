"""The Python answer to "may this person decide" agrees with the decision script's, case by case,
on real Redis: each case is a fresh waiting run whose stored gate both of them read."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import redis.asyncio as aioredis

from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.deciders import Approvers, is_group, refusal
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import Outcome, PendingCall, RunEnvelope
from runtime.record.store import RunStore

REQUESTER = "UREQ"


@dataclass(frozen=True, kw_only=True)
class Case:
    approvers: tuple[str, ...] = ("UANN", "SOPS")
    self_ok: bool = False
    external: bool = False
    user: str = "UANN"
    member_of: tuple[str, ...] = ()
    outcome: Outcome = "approved"
    outside: bool = False


CASES = {
    "listed member": Case(),
    "listed member rejects": Case(outcome="rejected"),
    "unlisted person": Case(user="UBOB"),
    "unlisted person rejects": Case(user="UBOB", outcome="rejected"),
    "in a listed group": Case(user="UBOB", member_of=("SOPS",)),
    "in an unlisted group": Case(user="UBOB", member_of=("SOTHER",)),
    "requester listed": Case(user=REQUESTER, approvers=(REQUESTER,)),
    "requester listed rejects": Case(user=REQUESTER, approvers=(REQUESTER,), outcome="rejected"),
    "requester listed, self ok": Case(user=REQUESTER, approvers=(REQUESTER,), self_ok=True),
    "requester in a listed group": Case(user=REQUESTER, member_of=("SOPS",)),
    "requester unlisted": Case(user=REQUESTER),
    "outsider listed": Case(outside=True),
    "outsider listed, external": Case(outside=True, external=True),
    "outsider unlisted, external": Case(user="UBOB", outside=True, external=True),
    "anyone": Case(approvers=(), user="UBOB"),
    "anyone, the requester": Case(approvers=(), user=REQUESTER),
    "anyone, the requester, self ok": Case(approvers=(), user=REQUESTER, self_ok=True),
    "anyone, an outsider": Case(approvers=(), user="UBOB", outside=True),
    "anyone, an outsider, external": Case(approvers=(), outside=True, external=True),
}


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = connect(redis_url)
    yield client
    await client.aclose()


async def waiting_call(store: RunStore, case: Case) -> tuple[str, PendingCall]:
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester=REQUESTER, thread="1.1"),
    )
    await store.create(envelope)
    lease = (await store.claim(envelope.run_id, kind="start", round_=0)).lease
    assert lease is not None
    call = PendingCall(
        approval_id=new_approval_id(),
        call_id="c",
        tool="delete_user",
        agent="ops",
        arguments="{}",
        expires_at=await store.server_time() + 60,
        approvers=case.approvers,
        external=case.external,
        digest=call_digest("delete_user", "{}"),
    )
    waiting = envelope.model_copy(update={"round": 1, "calls": (call,)})
    await store.wait_for_approvals(
        waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=case.self_ok
    )
    return envelope.run_id, call


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_the_python_answer_agrees_with_the_decision_script(
    redis: aioredis.Redis, prefix: str, case: Case
) -> None:
    keys = Keys(prefix)
    store, recorder = RunStore(redis, keys), DecisionRecorder(redis, keys)
    run_id, call = await waiting_call(store, case)
    view = await recorder.view(run_id, call.approval_id)
    assert view.gate is not None
    expected = refusal(
        view.gate,
        case.user,
        case.member_of,
        approving=case.outcome != "rejected",
        outside=case.outside,
    )
    choice = Choice(outcome=case.outcome, user_id=case.user, outside=case.outside)
    result = await recorder.decide(
        view, choice, channel="C1", member_of=case.member_of, seen=call.digest
    )
    assert result.status == (expected or "recorded")
    # A policy rule's approvers, checked for a grant, answer as the gate written from them.
    rule = Approvers.of(
        case.approvers, requester=REQUESTER, self_ok=case.self_ok, external=case.external
    )
    assert (
        refusal(
            rule,
            case.user,
            case.member_of,
            approving=case.outcome != "rejected",
            outside=case.outside,
        )
        == expected
    )


def test_a_group_is_an_s_id() -> None:
    assert [is_group(p) for p in ("S0SRE", "U01", "W01", "C01")] == [True, False, False, False]
