"""A replicated Redis for fault tests: a primary, a replica and three Sentinels, on random
loopback ports, their files in a temporary folder.

The replica reaches its primary through `LinkProxy`, a TCP relay in the test's process, so that
a test can hold the replication stream back (as a slow network does: the primary has sent, the
replica has not received) and drop what was held when the primary dies. That is how a test shows
what asynchronous replication loses without `WAIT`; nothing else about Redis is changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aioredis

from runtime.db.client import connect_to
from runtime.db.local import answers, find_redis_server, free_port
from runtime.settings import RuntimeSettings

MASTER_NAME = "countersign"
DOWN_AFTER_MS = 1000
"""Sentinel calls the primary down after this long without an answer (default 30 s)."""
FAILOVER_TIMEOUT_MS = 60_000
"""Also how long Sentinel leaves alone a replica that replicates from another address than the
primary's (ours goes through the proxy): longer than a test."""


class LinkProxy:
    """Relays the replica's connection to the primary; `hold()` keeps what the primary sends,
    `drop()` throws it away and cuts the link (the primary died with it unsent)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.held = 0
        """Bytes held back from the replica right now."""
        self._holding = False
        self._wakes: list[asyncio.Event] = []
        self._serving: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._dropped = False

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self._wake_all()

    def _wake_all(self) -> None:
        for wake in self._wakes:
            wake.set()

    async def drop(self) -> None:
        """Cut the link for good; what was held never reaches the replica."""
        self._dropped = True
        if self._server is not None:
            self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        self._wake_all()

    async def stop(self) -> None:
        await self.drop()
        if self._serving:
            await asyncio.wait(self._serving, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(
        self, replica_in: asyncio.StreamReader, replica_out: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)
        if self._dropped:
            replica_out.transport.abort()
            return
        try:
            primary_in, primary_out = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            replica_out.transport.abort()
            return
        self._writers += [replica_out, primary_out]
        await asyncio.gather(
            self._pipe(replica_in, primary_out, held=False),
            self._pipe(primary_in, replica_out, held=True),
            return_exceptions=True,
        )
        for writer in (replica_out, primary_out):
            writer.transport.abort()

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, *, held: bool
    ) -> None:
        buffer = bytearray()
        wake = asyncio.Event()
        self._wakes.append(wake)
        ended = False

        async def read() -> None:
            nonlocal ended
            # Always read, so the primary's send buffer never fills: it believes it has sent.
            while chunk := await source.read(65536):
                buffer.extend(chunk)
                wake.set()
            ended = True
            wake.set()

        reader = asyncio.ensure_future(read())
        try:
            while not self._dropped:
                if held:
                    self.held = len(buffer) if self._holding else 0
                if buffer and not (held and self._holding):
                    data = bytes(buffer)
                    buffer.clear()
                    sink.write(data)
                    await sink.drain()
                    continue
                if ended:
                    break
                await wake.wait()
                wake.clear()
        finally:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
            sink.transport.abort()


class ReplicatedRedis:
    """Primary, replica (through `LinkProxy`) and three Sentinels watching them."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.binary = find_redis_server()
        self.primary_port = free_port()
        self.replica_port = free_port()
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.proxy = LinkProxy(self.primary_port)
        self._processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def sentinels(self) -> str:
        """As `REDIS_SENTINELS` wants them."""
        return ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)

    def environ(self, min_replicas: int, wait_ms: int = 500) -> dict[str, str]:
        """The settings that point a process at this Redis through Sentinel."""
        return {
            # Only the scheme and database count with Sentinel: this host is never dialled.
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "REDIS_TLS_URL": "",
            "REDIS_SENTINELS": self.sentinels,
            "REDIS_SENTINEL_MASTER": MASTER_NAME,
            "REDIS_MIN_REPLICAS": str(min_replicas),
            "REDIS_WAIT_MS": str(wait_ms),
        }

    @property
    def primary_url(self) -> str:
        """The first primary, directly (for tests without a failover)."""
        return f"redis://127.0.0.1:{self.primary_port}/0"

    async def start(self, *, sentinels: bool = True) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        await self.proxy.start()
        self._server("primary", self.primary_port, [])
        await _until(lambda: answers(self.primary_url), "the primary answers")
        self._server(
            "replica", self.replica_port, ["--replicaof", "127.0.0.1", str(self.proxy.port)]
        )
        await _until(self._replica_in_sync, "the replica is in sync")
        if not sentinels:
            return
        for port in self.sentinel_ports:
            config = self.directory / f"sentinel-{port}.conf"
            config.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory.resolve()}\n"
                f"sentinel monitor {MASTER_NAME} 127.0.0.1 {self.primary_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
                f"sentinel parallel-syncs {MASTER_NAME} 1\n"
            )
            self._spawn(
                f"sentinel-{port}",
                [
                    self.binary,
                    str(config),
                    "--sentinel",
                    "--logfile",
                    str(self.directory / f"sentinel-{port}.log"),
                ],
            )
        # Sentinels learn of replicas from the primary's INFO, read every 10 s, and of each other
        # from hellos every 2 s: on a loaded machine that takes more than one INFO period.
        await _until(
            self._sentinels_ready, "the Sentinels see the primary, replica and peers", timeout=60
        )

    def _server(self, name: str, port: int, extra: list[str]) -> None:
        self._spawn(
            name,
            [
                self.binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dbfilename",
                f"{name}.rdb",
                "--repl-diskless-sync-delay",
                "0",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory.resolve()),
                "--logfile",
                str(self.directory / f"{name}.log"),
                *extra,
            ],
        )

    def _spawn(self, name: str, command: list[str]) -> None:
        self._processes[name] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _replica_in_sync(self) -> bool:
        info = _info(self.replica_port, "replication")
        return info.get("master_link_status") == "up"

    def _sentinels_ready(self) -> bool:
        for port in self.sentinel_ports:
            client = redis.Redis(port=port, socket_timeout=0.5)
            try:
                state: Any = client.sentinel_master(MASTER_NAME)
            except redis.RedisError:
                return False
            finally:
                client.close()
            if state.get("num-slaves") != 1 or state.get("num-other-sentinels") != 2:
                return False
        return True

    def primary_client(self) -> aioredis.Redis:
        """A client of whichever server is primary now, found through the Sentinels."""
        return connect_to(RuntimeSettings.from_environ(self.environ(0)))

    def kill_primary(self) -> None:
        """SIGKILL: no shutdown, no last flush of the replication stream."""
        process = self._processes["primary"]
        os.kill(process.pid, signal.SIGKILL)
        process.wait()

    def restart_old_primary(self) -> None:
        """The killed server starts again, empty, as a replica of the new primary (as a
        supervisor brings a failed node back). Started as an empty primary instead, it waits
        seconds for Sentinel to turn it into a replica, and a second failover meanwhile (a
        loaded machine can miss the new primary's answers for `DOWN_AFTER_MS`) may promote it
        and wipe the data set: Redis's own docs warn against restarting a primary that has no
        persistence."""
        self._server(
            "old-primary", self.primary_port, ["--replicaof", "127.0.0.1", str(self.replica_port)]
        )

    async def caught_up(self, timeout: float = 20) -> None:
        """Until the replica holds every byte the primary had written when this was called:
        after `proxy.release()`, a test waits here rather than betting on how fast a loaded
        machine relays the backlog."""
        target = int(str(_info(self.primary_port, "replication")["master_repl_offset"]))

        def holds_it() -> bool:
            offset = _info(self.replica_port, "replication").get("slave_repl_offset", -1)
            return int(str(offset)) >= target

        await _until(holds_it, "the replica catches up with the primary", timeout)

    async def wait_for_replica(self, timeout: float = 30) -> float:
        """Seconds until the new primary has a replica in sync again."""
        began = time.monotonic()

        def synced() -> bool:
            info = _info(self.replica_port, "replication")
            replica = info.get("slave0")
            return isinstance(replica, dict) and replica.get("state") == "online"

        await _until(synced, "the old primary rejoins as a replica", timeout)
        return time.monotonic() - began

    def named_primary(self) -> int | None:
        """The primary's port as a majority of Sentinels name it."""
        seen: dict[int, int] = {}
        for port in self.sentinel_ports:
            client = redis.Redis(port=port, socket_timeout=0.5)
            try:
                address: Any = client.sentinel_get_master_addr_by_name(MASTER_NAME)
            except redis.RedisError:
                continue
            finally:
                client.close()
            if address:
                seen[int(address[1])] = seen.get(int(address[1]), 0) + 1
        return next((port for port, votes in seen.items() if votes >= 2), None)

    async def wait_for_failover(self, timeout: float = 30) -> float:
        """Seconds until the Sentinels name the replica and it acts as primary."""
        began = time.monotonic()

        def promoted() -> bool:
            if self.named_primary() != self.replica_port:
                return False
            return _info(self.replica_port, "replication").get("role") == "master"

        await _until(promoted, "the Sentinels promote the replica", timeout)
        return time.monotonic() - began

    async def stop(self) -> None:
        await self.proxy.stop()
        for process in self._processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.directory.glob("*.log"))
        )


def _info(port: int, section: str) -> dict[str, object]:
    client = redis.Redis(port=port, socket_timeout=0.5)
    try:
        info: dict[str, object] = client.info(section)
        return info
    except redis.RedisError:
        return {}
    finally:
        client.close()


async def _until(check: Callable[[], bool], what: str, timeout: float = 20) -> None:
    """Until `check()` (blocking calls, run in a thread) is true."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.1)
