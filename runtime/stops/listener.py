"""Hearing that a working run was stopped, for every run of a worker at once.

A working run must stop at its next safe point, and its model call in flight be cancelled at
once (`runtime.stops.safe_point`). Polling the run's `stopped` field twice a second cost each run
in flight two Redis round trips a second: at 256 runs, 512 commands a second that found nothing.
Instead the stop script appends the run id to the stops stream of the run's shard
(`Keys.stops`) and each worker follows those streams with one blocking read per shard, only
while it has runs in flight, and wakes the run concerned.

Nothing is lost between a stop and a run starting to listen: the reader follows each stream
from the last entry it handled, never from "now", and remembers the runs it heard of, so a run
that starts listening after its stop was read is told at once. A run still looks at its field
every `FALLBACK_SECONDS`: that covers a stop made by an older web process (whose script does
not append), a reader cut off by a failover, and a stream trimmed past what was read.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from runtime.db.connection import longest_block
from runtime.db.streams import stream_tail
from runtime.process.shutdown import Shutdown

log = logging.getLogger(__name__)

STOPS_KEPT = 1000
"""Entries kept in each stops stream (approximately): far more than are made between reads."""
REMEMBERED = 4096
"""Stopped runs a listener remembers, for a run that starts listening after its stop was read."""
FALLBACK_SECONDS = 5.0
"""How often a working run still reads its own `stopped` field, in case the stream missed it."""


@dataclass(kw_only=True)
class StopListener:
    """One per worker, a `Poller`: follows every shard's stops stream while runs are in flight."""

    reads: aioredis.Redis
    """A client whose socket timeout outlasts a blocking read (`blocking_reads_redis`)."""
    streams: Sequence[str]
    name: str = "stop listener"
    _listening: dict[str, asyncio.Event] = field(default_factory=dict)
    _heard: OrderedDict[str, None] = field(default_factory=OrderedDict)
    _busy: asyncio.Event = field(default_factory=asyncio.Event)
    _stopping: Shutdown = field(default_factory=Shutdown)

    @contextlib.contextmanager
    def listening(self, run_id: str) -> Iterator[asyncio.Event]:
        """An event set once `run_id` is stopped (or was, as far as this listener heard)."""
        event = self._listening.setdefault(run_id, asyncio.Event())
        if run_id in self._heard:
            event.set()
        self._busy.set()
        try:
            yield event
        finally:
            if self._listening.get(run_id) is event:
                del self._listening[run_id]

    def stop(self) -> None:
        self._stopping.set()
        self._busy.set()

    async def run(self) -> None:
        async with asyncio.TaskGroup() as group:
            for stream in self.streams:
                group.create_task(self._follow(stream))

    async def _follow(self, stream: str) -> None:
        # From the newest entry before any run listened: every later one is read.
        last = await stream_tail(self.reads, stream, self._stopping, follower=self.name)
        while not self._stopping.is_set():
            if not self._listening:
                # Idle: no command at all until a run starts listening.
                self._busy.clear()
                await self._busy.wait()
                continue
            last = await self._read(stream, last)

    async def _read(self, stream: str, last: str) -> str:
        block_ms = max(1, int(longest_block(self.reads) * 1000))
        try:
            reply: Any = await self._stopping.unless_stopped(
                self.reads.xread({stream: last}, count=100, block=block_ms)
            )
        except RedisError:
            log.warning("%s: %s cannot be read; runs fall back to polling", self.name, stream)
            await self._stopping.sleep(1.0)
            return last
        for _stream, entries in reply or []:
            for entry_id, fields in entries:
                last = _text(entry_id)
                run_id = fields.get(b"run_id")
                if run_id is not None:
                    self._heard_of(_text(run_id))
        return last

    def _heard_of(self, run_id: str) -> None:
        self._heard[run_id] = None
        if len(self._heard) > REMEMBERED:
            self._heard.popitem(last=False)
        event = self._listening.get(run_id)
        if event is not None:
            event.set()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
