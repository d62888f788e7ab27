"""The Python answer to "may this person decide" agrees with the decision script's, case by case,
on real Redis: each case is a fresh waiting run whose stored gate both of them read. Asking only
what can change the answer (`decides`) gives the same answer, and asks nothing the person's id
settles; a call decided one by one is the one the batch script refuses."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import redis.asyncio as aioredis

from runtime.calls.digest import call_digest
from runtime.db.connection import connect
from runtime.db.keys import Keys
from runtime.deciders import (
    Approvers,
    Deciders,
    decides,
    groups_of,
    is_group,
    one_by_one,
    refusal,
    split,
    too_few,
)
from runtime.decisions.batch import BatchRecorder, waiting_views
from runtime.decisions.recorder import Choice, DecisionRecorder
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.record.envelope import Outcome, PendingCall, RunEnvelope
from runtime.record.layout import HOME_TAB
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
    home: bool = False
    """Decided from the Home tab (else on the card, in the call's channel)."""
    in_channel: str | None = None
    """From the Home tab: the channel Slack found the person in (None: none of the call's)."""

    @property
    def absent(self) -> bool:
        return self.home and self.in_channel != "C1"


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
    "anyone, from the Home tab, in the channel": Case(
        approvers=(), user="UBOB", home=True, in_channel="C1"
    ),
    "anyone, from the Home tab, not in the channel": Case(approvers=(), user="UBOB", home=True),
    "anyone, from the Home tab, not in the channel, rejects": Case(
        approvers=(), user="UBOB", home=True, outcome="rejected"
    ),
    "anyone, from the Home tab, the requester": Case(
        approvers=(), user=REQUESTER, home=True, in_channel="C1"
    ),
    "listed member, from the Home tab": Case(home=True),
    "in a listed group, from the Home tab": Case(user="UBOB", member_of=("SOPS",), home=True),
    "anyone, from the Home tab, an outsider in the channel": Case(
        approvers=(), user="UBOB", home=True, in_channel="C1", outside=True
    ),
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
        absent=case.absent,
    )
    choice = Choice(
        outcome=case.outcome, user_id=case.user, outside=case.outside, in_channel=case.in_channel
    )
    result = await recorder.decide(
        view,
        choice,
        channel=HOME_TAB if case.home else "C1",
        member_of=case.member_of,
        seen=call.digest,
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
            absent=case.absent,
        )
        == expected
    )
    # Asking only what can change the answer answers the same.
    facts = Facts(case)
    allowed = await decides(view.gate, case.user, facts, approving=case.outcome != "rejected")
    assert allowed == (expected is None)


@dataclass
class Facts:
    """What a caller would find out about the case's person (`runtime.deciders.Facts`), and
    what it was asked."""

    case: Case
    asked: list[str] = field(default_factory=list)

    async def members(self, group_id: str) -> frozenset[str]:
        self.asked.append(group_id)
        return frozenset({self.case.user} if group_id in self.case.member_of else ())

    async def present(self) -> bool:
        self.asked.append("present")
        return not self.case.absent

    async def outside(self) -> bool:
        self.asked.append("outside")
        return self.case.outside


def gate(approvers: tuple[str, ...], *, self_ok: bool = False, external: bool = False) -> Deciders:
    return Approvers.of(approvers, requester=REQUESTER, self_ok=self_ok, external=external)


async def test_nothing_is_asked_that_the_persons_id_settles() -> None:
    # The requester approving their own call: no group, channel or standing could change it.
    own = Facts(Case(user=REQUESTER))
    assert not await decides(gate(("SOPS",)), REQUESTER, own)
    assert own.asked == []
    # Listed by id: no group looked up; only whether they are inside the workspace.
    listed = Facts(Case())
    assert await decides(gate(("UANN", "SOPS")), "UANN", listed)
    assert listed.asked == ["outside"]
    # A grant's maker, whose standing the grant recorded: nothing about it is asked.
    granted = Facts(Case(user="UBOB", member_of=("SOPS",), outside=True))
    assert not await decides(gate(("SOPS",)), "UBOB", granted, outside=True)
    assert granted.asked == []
    # Groups one at a time, the first one found is enough.
    grouped = Facts(Case(user="UBOB", member_of=("SONE",)))
    assert await decides(gate(("SONE", "STWO")), "UBOB", grouped)
    assert grouped.asked == ["SONE", "outside"]
    # A call anyone may decide: whether they are where it is, then their standing.
    anyone = Facts(Case(approvers=(), user="UBOB", home=True))
    assert not await decides(gate(()), "UBOB", anyone)
    assert anyone.asked == ["present"]


async def test_the_groups_of_a_rejection_are_looked_up_for_the_requester_too() -> None:
    """The click gate looks groups up before knowing the choice: as for a rejection."""
    facts = Facts(Case(user=REQUESTER, member_of=("SOPS",)))
    assert await groups_of(gate(("SOPS",)), REQUESTER, facts, approving=False) == ("SOPS",)
    assert await groups_of(gate(("SOPS",)), REQUESTER, facts) == ()


@pytest.mark.parametrize(
    ("quorum", "confirm"), [(1, None), (2, None), (1, "n")], ids=["plain", "quorum", "typed"]
)
async def test_a_call_decided_one_by_one_is_one_the_batch_script_refuses(
    redis: aioredis.Redis, prefix: str, quorum: int, confirm: str | None
) -> None:
    keys = Keys(prefix)
    store = RunStore(redis, keys)
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
    expires = await store.server_time() + 60
    calls = tuple(
        PendingCall(
            approval_id=new_approval_id(),
            call_id=f"c{n}",
            tool="delete_user",
            agent="ops",
            arguments=f'{{"n": {n}}}',
            expires_at=expires,
            approvers=("UANN",),
            quorum=quorum if n else 1,
            confirm=confirm if n else None,
            digest=call_digest("delete_user", f'{{"n": {n}}}'),
        )
        for n in range(2)
    )
    waiting = envelope.model_copy(update={"round": 1, "calls": calls})
    await store.wait_for_approvals(
        waiting, "{}", lease=lease, previous=envelope, reminders={}, self_ok=False
    )
    views = await waiting_views(DecisionRecorder(redis, keys), envelope.run_id)
    result = await BatchRecorder(redis=redis, keys=keys).decide(
        envelope.run_id,
        views[0].round,
        Choice(outcome="approved", user_id="UANN"),
        channel="C1",
        seen={c.approval_id: c.digest for c in calls},
        member_of={},
    )
    alone = one_by_one(quorum=quorum, confirm=confirm)
    assert (result.status == "not_offered") == alone
    assert result.status == ("not_offered" if alone else "recorded")


def test_a_group_is_an_s_id() -> None:
    assert [is_group(p) for p in ("S0SRE", "U01", "W01", "C01")] == [True, False, False, False]
    assert split(("U01", "S0SRE", "W01", "S0OPS")) == (("U01", "W01"), ("S0SRE", "S0OPS"))


def test_a_quorum_out_of_reach_is_known_only_without_groups() -> None:
    assert too_few(("UANN", "UBOB"), 3) == 2
    assert too_few(("UANN", "UANN"), 2) == 1  # the same person twice counts once
    assert too_few(("UANN", "SOPS"), 3) is None  # the group's members count at click time
    assert too_few((), 5) is None  # anyone
    assert too_few(("UANN", "UBOB"), 2) is None
