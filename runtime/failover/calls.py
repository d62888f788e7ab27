"""Tool calls a worker ran lately, written back to a primary that a failover promoted without
them, so that a retried job reuses a tool's output instead of running the tool again.

With `REDIS_MIN_REPLICAS=0` a tool's recorded output (`journal:<call id>`, with its `executed`
audit entry) and its start mark (`started:<call id>`) can be lost with the primary that took
them; the job's retry on the new primary would then run the tool again, or not know that it may
have run. The worker that ran it still holds both: it remembers each call for
`REMEMBER_SECONDS` (`started`, `recorded`: no Redis command), and once the primary changes, it
writes back whatever the new primary lacks (`runtime/record/lua/restore.lua`: only there, only
while the run exists, never over what is there).

What cannot be written back: a worker killed (or restarted) before the new primary was reachable
took the output with it. Its retry then finds the start mark, if that survived, and asks a
person before running the tool again (`runtime.runs.lost_outcomes`); if the mark was lost too,
the tool runs again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.failover.identity import Primary
from runtime.failover.recent import Recent, Written
from runtime.record import scripts as rs
from runtime.settings import RuntimeSettings

log = logging.getLogger(__name__)

REMEMBER_SECONDS = 900.0
"""As long as the web remembers decisions (`runtime.failover.decisions`)."""
MOST = 2_000
MOST_BYTES = 32 * 1024 * 1024
"""Outputs remembered at most, in count and in bytes (the oldest go first)."""


@dataclass(kw_only=True, slots=True)
class CallWritten(Written):
    run_id: str
    call_id: str
    started: int | None = None
    """The round the call was marked started in (None: no mark to write back)."""
    output: str = ""
    """The recorded outcome (`journal:<call id>`), once the tool returned."""
    audit: str = ""
    """Its `executed` audit entry."""


class RecentCalls(Recent[tuple[str, str], CallWritten]):
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        *,
        seconds: float = REMEMBER_SECONDS,
        most: int = MOST,
        most_bytes: int = MOST_BYTES,
    ) -> None:
        super().__init__(seconds=seconds, most=most)
        self._keys = keys
        self._restore = rs.once(redis, keys, rs.RESTORE)
        self._most_bytes = most_bytes
        self._bytes = 0

    @classmethod
    def of(cls, settings: RuntimeSettings, redis: aioredis.Redis, keys: Keys) -> RecentCalls:
        """A worker's (off on a Redis Cluster: `runtime.failover.watch.watch_for`)."""
        return cls.off(redis, keys) if settings.redis_cluster else cls(redis, keys)

    @classmethod
    def off(cls, redis: aioredis.Redis, keys: Keys) -> RecentCalls:
        """One that remembers nothing (a store outside a worker)."""
        recent = cls(redis, keys)
        recent.switch_off()
        return recent

    def started(self, run_id: str, call_id: str, round_: int) -> None:
        """The call was marked started, and its tool is about to run."""
        entry = CallWritten(noted=time.monotonic(), run_id=run_id, call_id=call_id, started=round_)
        self._keep(entry)

    def recorded(self, run_id: str, call_id: str, output: str, audit: str) -> None:
        """The tool returned and its output was recorded."""
        entry = CallWritten(
            noted=time.monotonic(), run_id=run_id, call_id=call_id, output=output, audit=audit
        )
        self._keep(entry)

    def holds_output(self, run_id: str, call_id: str) -> bool:
        """Whether this worker recorded the call's output lately (`reuse` has it)."""
        entry = self.entries.get((run_id, call_id))
        return entry is not None and bool(entry.output)

    def not_running(self, run_id: str, call_id: str) -> None:
        """The start mark was taken back (the tool did not start, or raised)."""
        entry = self.entries.get((run_id, call_id))
        if entry is not None and not entry.output:
            self.forget((run_id, call_id))

    def _keep(self, entry: CallWritten) -> None:
        self.remember((entry.run_id, entry.call_id), entry)
        while self._bytes > self._most_bytes and len(self.entries) > 1:
            self.forget(next(iter(self.entries)))

    def kept(self, entry: CallWritten) -> None:
        self._bytes += len(entry.output) + len(entry.audit)

    def dropped(self, entry: CallWritten) -> None:
        self._bytes -= len(entry.output) + len(entry.audit)

    async def reuse(self, run_id: str, call_id: str) -> bytes | None:
        """The output this worker recorded for the call, if the primary has lost it since: written
        back (`runtime.record.store.RunStore.journal_entry`, whose retry of the job would
        otherwise run the tool again before the next tick of the watch)."""
        entry = self.entries.get((run_id, call_id))
        if entry is None or not entry.output:
            return None
        status, _ = await self._write_back(entry, "")
        if status == "gone":
            return None
        log.warning(
            "run %s: the output of tool call %s was not on the Redis primary (lost in a "
            "failover): this worker still had it, and reuses it",
            run_id,
            call_id,
        )
        return entry.output.encode()

    async def look(self, key: tuple[str, str], entry: CallWritten, primary: Primary) -> int | None:
        run_id, call_id = key
        status, offset = await self._write_back(entry, primary.replid)
        if status == "there":
            return offset
        if status == "gone":
            self.forget(key)
        elif status == "restored":
            what = "output" if entry.output else "start mark"
            log.warning(
                "run %s: the %s of tool call %s, lost in a Redis failover, written back to the "
                "new primary: a retry reuses it instead of running the tool again",
                run_id,
                what,
                call_id,
            )
        return None  # 'moved', or written just now: looked at again next tick

    async def _write_back(self, entry: CallWritten, replid: str) -> tuple[str, int]:
        """`restore.lua` for `entry`, on the primary `replid` ('': whichever answers)."""
        reply = await self._restore(
            rs.Restore(
                run=self._keys.run(entry.run_id),
                audit=self._keys.shard_of(entry.run_id).audit,
                replid=replid,
                call_id=entry.call_id,
                outcome=entry.output,
                entry=entry.audit if entry.output else "",
                started_round="" if entry.started is None else str(entry.started),
            )
        )
        status = reply[0].decode() if isinstance(reply[0], bytes) else str(reply[0])
        return status, int(reply[1])
