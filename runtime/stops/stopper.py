"""Stopping a run through the stop script (`runtime/record/lua/stop.lua`).

Who may stop is enforced inside the script: the requester, anyone who may decide one of the
run's open calls (from their gates, and for "anyone" from the call's channel), and the `ADMINS`;
the caller says who asked, from where, and which of the groups involved that person is in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, cast

import redis.asyncio as aioredis

from runtime.audit.events import AuditEvent
from runtime.db.keys import Keys
from runtime.db.replication import NO_REPLICAS, Replication
from runtime.deciders import split
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.envelope import (
    CardCopy,
    PendingCall,
    RunEnvelope,
)
from runtime.record.layout import CallGate
from runtime.record.reads import Whole
from runtime.record.stop_mark import StopMark
from runtime.record.view import read_whole
from runtime.stops.listener import STOPS_KEPT

StopStatus = Literal[
    "stopped",  # a waiting run: stopped now, its open calls decided `stopped`
    "stopping",  # a working run: it stops at its next safe point
    "already",  # someone stopped it before
    "closed",  # it has ended
    "gone",  # no such run
    "not_allowed",  # this person may not stop it
]

# A stopped run's record stays this long, so late clicks on its cards can say who stopped it.
STOPPED_KEPT_SECONDS = 86400


@dataclass(frozen=True, kw_only=True, slots=True)
class Principals:
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    @classmethod
    def parse(cls, principals: tuple[str, ...]) -> Principals:
        users, groups = split(principals)
        return cls(users=users, groups=groups)


@dataclass(frozen=True, kw_only=True, slots=True)
class StopView:
    """A run as a stop needs it; `envelope` is None when this version cannot read it."""

    run_id: str
    exists: bool
    requester: str | None
    envelope: RunEnvelope | None
    gates: dict[str, CallGate]
    """The open and decided calls of the current round, by approval id."""
    message_ts: dict[str, str]
    copies: dict[str, tuple[CardCopy, ...]]
    status_message: str | None
    status_steps: tuple[str, ...]
    status: str | None = None
    """The run's status as read (`waiting`, `working`, ...)."""

    def in_channel(self, approval_id: str, where: str) -> bool:
        """`where` is the call's channel, or the channel of one of its card's copies."""
        gate = self.gates.get(approval_id)
        copies = self.copies.get(approval_id, ())
        if gate is None:
            return False
        return gate.channel == where or any(c.channel == where for c in copies)

    def open_calls(self, approval_ids: tuple[str, ...]) -> list[PendingCall]:
        """The calls named, with their card ids, as far as the envelope can be read."""
        if self.envelope is None:
            return []
        calls = []
        for approval_id in approval_ids:
            call = self.envelope.call(approval_id)
            if call is not None:
                calls.append(
                    call.model_copy(
                        update={
                            "message_ts": self.message_ts.get(approval_id),
                            "copies": self.copies.get(approval_id, ()),
                        }
                    )
                )
        return calls


@dataclass(frozen=True, kw_only=True, slots=True)
class StopResult:
    status: StopStatus
    mark: StopMark | None = None
    stopped_calls: tuple[str, ...] = ()
    """Approval ids decided `stopped` by this stop (their cards need redrawing)."""


class RunStopper:
    def __init__(
        self, redis: aioredis.Redis, keys: Keys, *, replication: Replication = NO_REPLICAS
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._replication = replication
        self._stop = rs.once(redis, keys, rs.STOP)

    async def view(self, run_id: str) -> StopView:
        whole = await read_whole(self._redis, self._keys, Whole, run_id)
        return StopView(
            run_id=run_id,
            exists=whole.status is not None,
            requester=whole.requester or None,
            envelope=whole.readable_envelope,
            gates=whole.gates,
            message_ts=whole.message_ts,
            copies=whole.copies,
            status_message=whole.status_message or None,
            status_steps=whole.status_steps or (),
            status=whole.status,
        )

    async def stop(
        self,
        view: StopView,
        *,
        user_id: str,
        user_name: str | None,
        member_of: tuple[str, ...],
        admins: Principals,
        where: str,
        team: str | None = None,
    ) -> StopResult:
        """Stop the run for `user_id`, asking from `where` (a channel id, or
        `run_record.HOME_TAB`): "anyone" may stop for a call only in its channel (the Home tab
        offers Stop on the requester's own runs). `team`: the person's Slack team, for the
        audit trail."""
        run_id = view.run_id
        who = {"user_id": user_id, "user_name": user_name, **({"team": team} if team else {})}
        shard = self._keys.shard_of(run_id)
        reply = await self._stop(
            rs.Stop(
                run=self._keys.run(run_id),
                deadlines=shard.deadlines,
                reminders=shard.reminders,
                audit=shard.audit,
                tombstone=self._keys.tombstone(run_id),
                live_runs=shard.live_runs,
                stops=shard.stops,
                who=json.dumps(who),
                groups=json.dumps(list(member_of)),
                admins=json.dumps({"users": list(admins.users), "groups": list(admins.groups)}),
                run_id=run_id,
                event=AuditEvent.STOPPED,
                tombstone_seconds=rr.TOMBSTONE_SECONDS,
                stopped_seconds=STOPPED_KEPT_SECONDS,
                stops_length=STOPS_KEPT,
                where=where,
            )
        )
        parts = [p.decode() if isinstance(p, bytes) else str(p) for p in reply]
        status = cast(StopStatus, parts[0])
        if status in ("stopping", "stopped", "already"):
            await self._replication.confirm()  # NotReplicated: the person tries again
        mark = StopMark.model_validate_json(parts[1]) if len(parts) > 1 else None
        stopped: Any = json.loads(parts[2]) if len(parts) > 2 else []
        # Lua's cjson encodes an empty list as an empty object.
        return StopResult(
            status=status,
            mark=mark,
            stopped_calls=tuple(stopped) if isinstance(stopped, list) else (),
        )
