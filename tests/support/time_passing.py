"""Time passing without waiting for it: what the product keeps in Redis about an instant moves
back by the same amount, so that to the code that reads it against Redis's clock (on purpose,
`runtime.db.clock`: every process agrees on it) as much time has passed.

A test that sleeps past a deadline pays for it in seconds and, on a loaded machine, in flakes;
one that lowers the deadline must lower it so far that the test races it. Moving the stored
instants keeps the product's own durations, costs a few commands and is exact.

- `pass_time`, for one waiting call: `deadline:<id>` and the envelope's `PendingCall.expires_at`
  (the decision script checks the first, the worker plans from the second), `reach:<id>`
  (`CallReach`: when it was asked, its reminders, its escalation) and `nudged:<id>` (until when
  those were done, so that what was done stays done), and its members of the shard's deadlines
  and reminders due sets; read and written with the record's own layout and models.
- `reminders_come_due`: whatever a run has left in the reminders due set is due now, and the
  reminders poller has handled it (a member goes once handled, `runtime.jobs.due_set`): what a
  test that proves no reminder comes waits for.
- `lapse_debounce`: people's Home tab debounce (`HomeKeys.published`, a key that expires) ends.
- `refill_publish_rate`: the web processes' bucket of `views.publish` tokens (`bot.home.pace`,
  the instant its next token is due) is full.
- `quiet_for`: a job a worker holds has had no heartbeat for a while (Redis's idle time of the
  stream entry, which a takeover reads), set by `XCLAIM ... IDLE` to the same holder, counting
  no delivery.
- `mark_older`: a worker's mark of being alive (`runtime.jobs.live_workers`) is older.

What a process waits out on its own clock (a publish it has put off in memory, a backoff) does
not move: a test that needs that time to pass still waits for it.

Usage:

    await pass_time(bot.redis, bot.keys, card, seconds=2.5)
    await lapse_debounce(bot.redis, bot.keys, ["UBOB", "UCAROL"])
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.client import Pipeline
from redis.typing import EncodableT, FieldT

from runtime.db.keys import JOB_GROUP, Keys
from runtime.jobs.entries import entry_of
from runtime.record import layout as rr
from runtime.record.envelope import dump_envelope, parse_envelope
from runtime.record.reach import CallReach
from tests.support.fake_slack import Message


def asked_by(card: Message) -> tuple[str, str]:
    """The run and approval a card with an Approve button asks about."""
    value = str(next(a["value"] for a in card.actions() if a["action_id"] == "approve"))
    run_id, approval_id = value.split(":")[:2]
    return run_id, approval_id


async def pass_time(redis: aioredis.Redis, keys: Keys, card: Message, *, seconds: float) -> None:
    """As if `seconds` had passed for the call that `card` asks about, which is waiting."""
    run_id, approval_id = asked_by(card)
    run, shard, member = keys.run(run_id), keys.shard_of(run_id), f"{run_id}:{approval_id}"
    # The card is in Slack a moment before its ts is in the record, and a reminder that comes
    # due in between is put off for the due set's lease (a minute): time passes from when the
    # worker knows its card, as it does for a card that waited.
    deadline = asyncio.get_running_loop().time() + 10
    while await redis.hget(run, rr.TS + approval_id) is None:
        assert asyncio.get_running_loop().time() < deadline, f"the card of {member} not recorded"
        await asyncio.sleep(0.02)

    async def move(pipe: Pipeline) -> None:
        # Read under WATCH, written in one MULTI: a worker writing the record meanwhile (a
        # reminder done) makes the transaction start again rather than be overwritten.
        names = [rr.ENVELOPE, *(f + approval_id for f in (rr.DEADLINE, rr.REACH, rr.NUDGED))]
        stored: Any = await pipe.hmget(run, names)
        raw_envelope, deadline, reach, nudged = stored
        assert raw_envelope is not None and deadline is not None, f"{member} is not waiting"
        envelope = parse_envelope(run_id, raw_envelope)
        calls = tuple(
            c.model_copy(update={"expires_at": c.expires_at - seconds})
            if c.approval_id == approval_id
            else c
            for c in envelope.calls
        )
        fields: dict[FieldT, EncodableT] = {
            rr.ENVELOPE: dump_envelope(envelope.model_copy(update={"calls": calls})),
            rr.DEADLINE + approval_id: repr(float(deadline) - seconds),
        }
        if reach is not None:
            fields[rr.REACH + approval_id] = earlier(CallReach.model_validate_json(reach), seconds)
        if nudged is not None:
            fields[rr.NUDGED + approval_id] = repr(float(nudged) - seconds)
        due = {
            name: score
            for name in (shard.deadlines, shard.reminders)
            if (score := await pipe.zscore(name, member)) is not None
        }
        pipe.multi()  # type: ignore[no-untyped-call]
        pipe.hset(run, mapping=fields)
        for name, score in due.items():
            pipe.zadd(name, {member: score - seconds}, xx=True)

    await redis.transaction(move, run, shard.deadlines, shard.reminders)


def earlier(reach: CallReach, seconds: float) -> str:
    """The stored form of `reach` with each of its instants `seconds` earlier."""
    moved = reach.model_copy(
        update={
            "asked_at": reach.asked_at - seconds,
            "remind_at": tuple(at - seconds for at in reach.remind_at),
            "escalate_at": None if reach.escalate_at is None else reach.escalate_at - seconds,
        }
    )
    return moved.model_dump_json()


async def lapse_debounce(redis: aioredis.Redis, keys: Keys, user_ids: Iterable[str]) -> None:
    """As if each person's Home tab debounce had run out: its key goes, as Redis expires it (a
    debounce already over has no key, and nothing changes)."""
    await redis.delete(*(keys.home.published(user_id) for user_id in user_ids))


async def refill_publish_rate(redis: aioredis.Redis, keys: Keys) -> None:
    """As if nobody had published a tab for long enough to fill the bucket: the script counts a
    missing next-token instant as now, the instant of a full bucket."""
    await redis.delete(keys.home.publish_rate)


async def quiet_for(
    redis: aioredis.Redis, keys: Keys, entry_id: str, holder: str, *, seconds: float
) -> None:
    """As if the job `entry_id` (as `JobQueue` gives it out) that `holder` holds had had no
    heartbeat for `seconds`."""
    stream, entry = entry_of(keys, entry_id)
    idle_ms, ids = int(seconds * 1000), (entry,)
    claimed: Any = await redis.xclaim(stream, JOB_GROUP, holder, 0, ids, idle=idle_ms, justid=True)
    assert claimed, f"{entry_id} is not pending"


async def mark_older(redis: aioredis.Redis, keys: Keys, worker: str, *, seconds: float) -> None:
    """As if `worker`'s last mark of being alive had been written `seconds` earlier."""
    at = await redis.zscore(keys.live_workers, worker)
    assert at is not None, f"{worker} has no mark"
    await redis.zadd(keys.live_workers, {worker: at - seconds}, xx=True)


async def reminders_come_due(
    redis: aioredis.Redis, keys: Keys, run_id: str, *, timeout: float = 10
) -> None:
    """As if every reminder run `run_id` has left had come due; until the poller handled them."""
    key = keys.shard_of(run_id).reminders
    members: Any = await redis.zrange(key, 0, -1)
    left = [m.decode() for m in members if m.decode().startswith(f"{run_id}:")]
    if not left:
        return
    seconds, micros = await redis.time()
    await redis.zadd(key, dict.fromkeys(left, seconds + micros / 1e6), xx=True)
    deadline = asyncio.get_running_loop().time() + timeout
    while any([await redis.zscore(key, member) is not None for member in left]):
        assert asyncio.get_running_loop().time() < deadline, f"reminders of {run_id} not handled"
        await asyncio.sleep(0.02)
