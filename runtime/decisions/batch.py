"""Batch decisions ("Approve all", "Reject all"): one person decides every waiting call of a run
in one atomic step of the decision script (`runtime/record/lua/batch.lua`), each call bound to
the digest the person's modal showed and checked exactly as a click on its card would be.

Nothing is decided unless every call would take the choice: a call the person may not decide,
one edited since the modal opened (`stale`), or one decided meanwhile refuses the whole batch.
Calls that need a quorum or a typed confirmation are never decided in a batch (`not_offered`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Literal, cast

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.keys import Keys
from runtime.db.replication import NO_REPLICAS, Replication
from runtime.decisions.recorder import (
    CHOSEN,
    CallView,
    Choice,
    DecisionRecorder,
    RecordResult,
    Status,
    result_of,
)
from runtime.jobs.contracts import ResumeJob
from runtime.record import scripts as rs
from runtime.record.reads import Whole
from runtime.record.view import read_whole

BatchStatus = Literal["recorded", "refused", "not_offered"]


@dataclass(frozen=True, kw_only=True, slots=True)
class BatchResult:
    status: BatchStatus
    results: Mapping[str, RecordResult]
    """`recorded`: each call's result, by approval id."""
    refused: Mapping[str, Status]
    """`refused`: why each refusing call would not take the choice."""
    single: tuple[str, ...] = ()
    """`not_offered`: the calls that need a quorum or a typed confirmation."""


def new_batch_id() -> str:
    return "b" + secrets.token_hex(8)


async def waiting_views(recorder: DecisionRecorder, run_id: str) -> list[CallView]:
    """Every call of `run_id` still waiting for a decision, as the decision needs to see it;
    empty once the run is not waiting."""
    redis, keys = recorder.redis, recorder.keys
    whole = await read_whole(redis, keys, Whole, run_id)
    envelope = whole.readable_envelope
    if whole.status != "waiting" or envelope is None:
        return []
    views = []
    for call in envelope.calls:
        if call.decision is None and call.approval_id not in whole.decided:
            views.append(await recorder.view(run_id, call.approval_id))
    return [view for view in views if view.call is not None and view.gate is not None]


@dataclass(kw_only=True)
class BatchRecorder:
    redis: aioredis.Redis
    keys: Keys
    replication: Replication = NO_REPLICAS

    def __post_init__(self) -> None:
        self._script = rs.once(self.redis, self.keys, rs.DECIDE_BATCH)

    async def decide(
        self,
        run_id: str,
        round_: str,
        choice: Choice,
        *,
        channel: str,
        seen: Mapping[str, str],
        member_of: Mapping[str, tuple[str, ...]],
    ) -> BatchResult:
        """Record `choice` for every call in `seen` (approval id: the digest the person was
        shown), or for none. `member_of`: per call, the gate's groups the person is in."""
        job = ResumeJob(run_id=run_id, round=int(round_)) if round_.isdigit() else None
        chosen = replace(choice, batch=choice.batch or new_batch_id())
        sent = {k: v for k, v in asdict(chosen).items() if v is not None or k not in CHOSEN}
        calls = [
            {
                "aid": aid,
                "digest": digest,
                "member": f"{run_id}:{aid}",
                "groups": json.dumps(list(member_of.get(aid, ()))),
            }
            for aid, digest in seen.items()
        ]
        shard = self.keys.shard_of(run_id)
        reply = await self._script(
            rs.DecideBatch(
                run=shard.run(run_id),
                deadlines=shard.deadlines,
                jobs=shard.jobs,
                audit=shard.audit,
                reminders=shard.reminders,
                calls=json.dumps(calls),
                choice=json.dumps(sent),
                where=channel,
                run_id=run_id,
                job=job.model_dump_json() if job else "",
                round=round_,
                denied_event=AuditEvent.DENIED,
            )
        )
        status = cast(BatchStatus, _text(reply[0]))
        body = json.loads(_text(reply[1]))
        if status == "not_offered":
            return BatchResult(status=status, results={}, refused={}, single=tuple(body))
        if status == "refused":
            return BatchResult(status=status, results={}, refused=dict(_pairs(body)), single=())
        results = {row[0]: result_of([str(p) for p in row[1:]]) for row in body}
        await self.replication.confirm()
        return BatchResult(status=status, results=results, refused={})


def _pairs(rows: Sequence[Sequence[str]]) -> list[tuple[str, Status]]:
    return [(row[0], cast(Status, row[1])) for row in rows]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
