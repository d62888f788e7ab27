"""What a waiting run's status message should say after one of its calls was decided while
others still wait ("Waiting for 1 of 2 approvals"): read by whoever recorded the decision, since
the worker is not working on the run until its last call is decided."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.record.reads import Whole
from runtime.record.view import read_whole
from runtime.reporter import Activity, RunView, batchable


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitingStatus:
    run: RunView
    message_id: str
    activity: Activity


async def waiting_status(redis: aioredis.Redis, keys: Keys, run_id: str) -> WaitingStatus | None:
    """The status of `run_id` while it still waits for some of its calls; None once it does
    not (resuming, finished, stopped) or when this version cannot read its record."""
    whole = await read_whole(redis, keys, Whole, run_id)
    message_id = whole.status_message
    if whole.status != "waiting" or message_id is None:
        return None
    envelope = whole.readable_envelope
    if envelope is None:
        return None
    open_calls = [
        call
        for call in envelope.calls
        if call.decision is None and call.approval_id not in whole.decided
    ]
    open_tools = tuple(call.tool for call in open_calls)
    if not open_tools:
        return None
    activity = Activity(
        steps=whole.status_steps or (),
        state="waiting",
        waiting_for=open_tools,
        approvals_asked=len(envelope.calls),
        batchable=batchable(open_calls),
    )
    return WaitingStatus(run=RunView.of(envelope), message_id=message_id, activity=activity)
