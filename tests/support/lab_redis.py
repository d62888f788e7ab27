"""A replicated Redis in network namespaces, for partition tests: three nodes (`n1`, `n2`, `n3`),
each a Redis server and a Sentinel on its own lab address; `n1` starts as the primary.

Beside them an `app` namespace (the web process, and where the worker's traffic leaves from)
and a `worker` namespace behind the test's proxy (`tests.support.tcp_proxy`): every lab address is
local
there, and each Redis and Sentinel port on it is a proxy to the real one, dialled from `app`. So
the worker shares the app's side of every partition, and the proxy adds latency, loss, resets
and stalls on its way to Redis. Both also reach the test's own loopback servers (the fake Slack
and model, the tools' ledger) through relays on their loopback, on the same ports.

The test reads each server and Sentinel through a relay on the host's loopback, made inside the
node's own namespace: those paths never cross the hub, so a partition does not blind the test.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from runtime.db.local import find_redis_server, free_port
from tests.support.namespaces import Lab, Namespace
from tests.support.tcp_proxy import Faults, TcpProxy

MASTER_NAME = "countersign"
NODES = ("n1", "n2", "n3")
REDIS_PORT = 6379
SENTINEL_PORT = 26379
DOWN_AFTER_MS = 2000
"""Sentinel calls a primary down after this long without an answer: short, for the test's
rounds, and long enough for a loaded machine not to fail over without a partition."""
FAILOVER_TIMEOUT_MS = 10_000


class LabRedis:
    def __init__(self, lab: Lab, directory: Path, *, rng: random.Random) -> None:
        self.lab = lab
        self.directory = directory
        self.binary = find_redis_server()
        self.rng = rng
        self.nodes = {node: lab.add(node) for node in NODES}
        self.app = lab.add("app")
        self.worker_side = lab.add_behind_proxy("worker")
        self.worker_proxies: list[TcpProxy] = []
        self.relays: list[TcpProxy] = []
        self.server_ports: dict[str, int] = {}
        """Node -> the host's loopback port relaying to its Redis."""
        self.sentinel_ports: dict[str, int] = {}
        self._processes: list[subprocess.Popen[bytes]] = []

    def address(self, node: str) -> str:
        return self.lab.addresses[node]

    @property
    def sentinels(self) -> str:
        return ",".join(f"{self.address(node)}:{SENTINEL_PORT}" for node in NODES)

    def environ(self, min_replicas: int, wait_ms: int = 500) -> dict[str, str]:
        return {
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "REDIS_TLS_URL": "",
            "REDIS_SENTINELS": self.sentinels,
            "REDIS_SENTINEL_MASTER": MASTER_NAME,
            "REDIS_MIN_REPLICAS": str(min_replicas),
            "REDIS_WAIT_MS": str(wait_ms),
        }

    async def start(self, loopback_ports: list[int]) -> None:
        """Servers, Sentinels, the test's relays, the worker's proxies, and relays from the
        app and worker namespaces to `loopback_ports` on the host."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for node in NODES:
            extra = [] if node == "n1" else ["--replicaof", self.address("n1"), str(REDIS_PORT)]
            self._server(node, extra)
        for node in NODES:
            self.server_ports[node] = await self._relay_in(node, REDIS_PORT)
            self.sentinel_ports[node] = await self._relay_in(node, SENTINEL_PORT)
        await until(lambda: self._replicas_online("n1") == 2, "both replicas are in sync")
        for node in NODES:
            self._sentinel(node)
        await until(self._sentinels_ready, "the Sentinels see the primary, replicas and peers")
        for node in NODES:
            for port in (REDIS_PORT, SENTINEL_PORT):
                proxy = TcpProxy(
                    listen_in=self.worker_side,
                    listen_host=self.address(node),
                    listen_port=port,
                    connect_in=self.app,
                    target_host=self.address(node),
                    target_port=port,
                    rng=self.rng,
                )
                await proxy.start()
                self.worker_proxies.append(proxy)
        host = Namespace.host()
        for inside in (self.app, self.worker_side):
            for port in loopback_ports:
                relay = TcpProxy(
                    listen_in=inside,
                    listen_host="127.0.0.1",
                    listen_port=port,
                    connect_in=host,
                    target_host="127.0.0.1",
                    target_port=port,
                )
                await relay.start()
                self.relays.append(relay)

    async def expose(self, inside: Namespace, port: int) -> None:
        """The host's loopback `port` reaches `inside`'s loopback `port` (the web's)."""
        relay = TcpProxy(
            listen_in=Namespace.host(),
            listen_host="127.0.0.1",
            listen_port=port,
            connect_in=inside,
            target_host="127.0.0.1",
            target_port=port,
        )
        await relay.start()
        self.relays.append(relay)

    async def _relay_in(self, node: str, port: int) -> int:
        local = free_port()
        relay = TcpProxy(
            listen_in=Namespace.host(),
            listen_host="127.0.0.1",
            listen_port=local,
            connect_in=self.nodes[node],
            target_host=self.address(node),
            target_port=port,
        )
        await relay.start()
        self.relays.append(relay)
        return local

    def set_worker_faults(self, faults: Faults) -> None:
        for proxy in self.worker_proxies:
            proxy.faults = faults

    def stall_worker(self, stalled: bool) -> None:
        for proxy in self.worker_proxies:
            proxy.stall() if stalled else proxy.resume()

    def worker_counts(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for proxy in self.worker_proxies:
            for name, value in vars(proxy.counts).items():
                totals[name] = totals.get(name, 0) + value
        return totals

    def _server(self, node: str, extra: list[str]) -> None:
        self._spawn(
            self.nodes[node],
            [
                self.binary,
                "--port", str(REDIS_PORT),
                "--bind", self.address(node),
                "--protected-mode", "no",
                "--save", "",
                "--appendonly", "no",
                "--repl-diskless-sync-delay", "0",
                "--repl-ping-replica-period", "1",
                "--repl-timeout", "5",
                "--dir", str(self.directory.resolve()),
                "--dbfilename", f"{node}.rdb",
                "--logfile", str(self.directory / f"{node}.log"),
                *extra,
            ],
        )  # fmt: skip

    def _sentinel(self, node: str) -> None:
        config = self.directory / f"sentinel-{node}.conf"
        config.write_text(
            f"port {SENTINEL_PORT}\nbind {self.address(node)}\nprotected-mode no\n"
            f"dir {self.directory.resolve()}\n"
            f"sentinel monitor {MASTER_NAME} {self.address('n1')} {REDIS_PORT} 2\n"
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {MASTER_NAME} 2\n"
        )
        log = self.directory / f"sentinel-{node}.log"
        self._spawn(
            self.nodes[node], [self.binary, str(config), "--sentinel", "--logfile", str(log)]
        )

    def _spawn(self, inside: Namespace, command: list[str]) -> None:
        self._processes.append(
            subprocess.Popen(
                inside.wrap(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )

    def info(self, node: str, section: str = "replication") -> dict[str, Any]:
        client = redis.Redis(port=self.server_ports[node], socket_timeout=1)
        try:
            found: dict[str, Any] = client.info(section)
            return found
        except redis.RedisError:
            return {}
        finally:
            client.close()

    def _replicas_online(self, node: str) -> int:
        info = self.info(node)
        if info.get("role") != "master":
            return 0
        return sum(
            1
            for key, value in info.items()
            if key.startswith("slave")
            and isinstance(value, dict)
            and value.get("state") == "online"
        )

    def _sentinel_state(self, node: str) -> dict[str, Any]:
        client = redis.Redis(port=self.sentinel_ports[node], socket_timeout=1)
        try:
            state: Any = client.sentinel_master(MASTER_NAME)
            return dict(state)
        except redis.RedisError:
            return {}
        finally:
            client.close()

    def _sentinels_ready(self) -> bool:
        for node in NODES:
            state = self._sentinel_state(node)
            if state.get("num-slaves") != 2 or state.get("num-other-sentinels") != 2:
                return False
        return True

    def named_primary(self) -> str | None:
        """The node a majority of the Sentinels name as primary."""
        votes: dict[str, int] = {}
        by_address = {self.address(node): node for node in NODES}
        for node in NODES:
            client = redis.Redis(port=self.sentinel_ports[node], socket_timeout=1)
            try:
                address: Any = client.sentinel_get_master_addr_by_name(MASTER_NAME)
            except redis.RedisError:
                continue
            finally:
                client.close()
            host = address[0].decode() if address and isinstance(address[0], bytes) else None
            if host in by_address:
                named = by_address[host]
                votes[named] = votes.get(named, 0) + 1
        return next((node for node, count in votes.items() if count >= 2), None)

    def settled(self) -> str | None:
        """The primary, once every Sentinel names it, it acts as one, the two other servers
        replicate from it and every Sentinel counts them; None before."""
        primary = self.named_primary()
        if primary is None or self._replicas_online(primary) != 2:
            return None
        for node in NODES:
            state = self._sentinel_state(node)
            if state.get("ip") != self.address(primary) or state.get("num-slaves") != 2:
                return None
        return primary

    async def wait_settled(self, timeout: float = 60) -> tuple[str, float]:
        """The primary once the servers settle after a partition, and seconds it took."""
        began = time.monotonic()
        found: list[str] = []

        def check() -> bool:
            primary = self.settled()
            if primary:
                found.append(primary)
            return primary is not None

        await until(check, "the servers settle on one primary with two replicas", timeout)
        return found[-1], time.monotonic() - began

    async def wait_promoted(self, old: str, timeout: float = 30) -> str | None:
        """The node the Sentinel majority promoted in `old`'s place (None: none within
        `timeout`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            named = await asyncio.to_thread(self.named_primary)
            if named is not None and named != old:
                return named
            await asyncio.sleep(0.2)
        return None

    def primary_client(self, node: str) -> redis.Redis:
        return redis.Redis(port=self.server_ports[node], socket_timeout=5)

    async def stop(self) -> None:
        for proxy in [*self.worker_proxies, *self.relays]:
            await proxy.stop()
        for process in self._processes:
            if process.poll() is None:
                process.kill()
                process.wait()

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}"
            for path in sorted(self.directory.glob("*.log"))
        )


async def until(check: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Until `check()` (blocking calls, run in a thread) is true."""
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        await asyncio.sleep(0.2)
