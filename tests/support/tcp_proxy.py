"""A TCP proxy of the test's own, for the faults a kernel's `netem` would give (this one has no
such qdisc): latency, loss, reordering, connections cut, stalls.

TCP hides packets from the processes on either side, so the proxy makes what they would see:
- latency: each chunk is delivered `latency` (+ up to `jitter`) seconds after it was read;
- loss: a lost segment is resent after a retransmission timeout, so a chunk "lost" (with
  probability `loss`) arrives `retransmit` seconds late, and, as in TCP, holds back what follows
  it on that connection;
- reordering: within one connection TCP keeps order, so reordering is between connections: with
  jitter, a command sent first on one arrives after one sent later on another;
- resets: with probability `reset` per chunk the connection is cut both ways (a dropped link,
  a firewall forgetting it);
- stalls: `stall()` holds everything in both directions until `resume()` (a link that is up but
  carries nothing, as a partition looks to a connection already open).

Listening and connecting sockets are made in namespaces (`tests.support.namespaces.Namespace`), so
one
proxy can join two of them. Every connection ends when either side ends or `stop()` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

from tests.support.namespaces import Namespace

CHUNK = 65536


@dataclass(kw_only=True)
class Faults:
    latency: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    retransmit: float = 0.2
    reset: float = 0.0


@dataclass(kw_only=True)
class Counts:
    connections: int = 0
    chunks: int = 0
    lost: int = 0
    resets: int = 0


@dataclass(eq=False, kw_only=True)
class TcpProxy:
    listen_in: Namespace
    listen_host: str
    listen_port: int
    connect_in: Namespace
    target_host: str
    target_port: int
    rng: random.Random = field(default_factory=random.Random)
    faults: Faults = field(default_factory=Faults)
    counts: Counts = field(default_factory=Counts)
    _server: asyncio.Server | None = None
    _flowing: asyncio.Event = field(default_factory=asyncio.Event)
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> None:
        self._flowing.set()
        sock = await self.listen_in.listener(self.listen_host, self.listen_port)
        self._server = await asyncio.start_server(self._serve, sock=sock)

    def stall(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def cut(self) -> None:
        """Cut every open connection (new ones are accepted)."""
        for writer in list(self._writers):
            writer.transport.abort()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        self.cut()
        self._flowing.set()
        # Cut, every connection ends on its own; cancelled only if it does not.
        if self._handlers:
            _, late = await asyncio.wait(self._handlers, timeout=5)
            for task in late:
                task.cancel()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)
        self.counts.connections += 1
        try:
            sock = await self.connect_in.connect(self.target_host, self.target_port)
            server_in, server_out = await asyncio.open_connection(sock=sock)
        except (OSError, TimeoutError):
            client_out.transport.abort()
            return
        ends = (client_out, server_out)
        self._writers.update(ends)
        try:
            await asyncio.gather(
                self._pipe(client_in, server_out, ends), self._pipe(server_in, client_out, ends)
            )
        finally:
            for writer in ends:
                writer.transport.abort()
                self._writers.discard(writer)

    def _delay(self, ends: tuple[asyncio.StreamWriter, ...]) -> float | None:
        """How late the chunk just read is delivered; None: the connection was cut instead."""
        faults = self.faults
        self.counts.chunks += 1
        if faults.reset and self.rng.random() < faults.reset:
            self.counts.resets += 1
            for writer in ends:
                writer.transport.abort()
            return None
        delay = faults.latency + self.rng.uniform(0, faults.jitter)
        if faults.loss and self.rng.random() < faults.loss:
            self.counts.lost += 1
            delay += faults.retransmit
        return delay

    async def _pipe(
        self,
        source: asyncio.StreamReader,
        sink: asyncio.StreamWriter,
        ends: tuple[asyncio.StreamWriter, ...],
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        last_due = 0.0

        async def read() -> None:
            nonlocal last_due
            try:
                while chunk := await source.read(CHUNK):
                    delay = self._delay(ends)
                    if delay is None:
                        return
                    # In order on one connection, as TCP delivers it.
                    last_due = max(last_due, loop.time() + delay)
                    queue.put_nowait((last_due, chunk))
            except (ConnectionError, OSError):
                pass
            finally:
                queue.put_nowait((0.0, b""))

        reader = asyncio.ensure_future(read())
        try:
            while True:
                due, chunk = await queue.get()
                if not chunk:
                    break
                if (wait := due - loop.time()) > 0:
                    await asyncio.sleep(wait)
                await self._flowing.wait()
                sink.write(chunk)
                await sink.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            for writer in ends:
                writer.transport.abort()
