"""A Redis that is not fit to keep runs, on real processes: one that may evict keys, one that is
full and refuses writes, one emptied under a running web and worker."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import redis

from runtime.local_redis import RedisServer, free_port
from tests.deployment import Deployment
from tests.processes import Process, wait_for_log


async def readyz(url: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(f"{url}/readyz") as response:
        body: dict[str, Any] = await response.json()
        return response.status, body


async def readyz_until(url: str, status: int, process: Process) -> dict[str, Any]:
    """The body of `url`'s /readyz once it answers `status` (the worker's starts late)."""
    for _ in range(200):
        try:
            answered, body = await readyz(url)
        except aiohttp.ClientError:
            answered, body = 0, {}
        if answered == status:
            return body
        await asyncio.sleep(0.1)
    raise AssertionError(f"{process.name} never answered {status} on /readyz:\n{process.log()}")


def configure(server: RedisServer, **config: str) -> None:
    client = redis.Redis.from_url(server.url)
    try:
        for name, value in config.items():
            client.config_set(name.replace("_", "-"), value)
    finally:
        client.close()


async def test_a_redis_that_may_evict_keys_fails_readiness_of_both_processes(
    own_redis: RedisServer, tmp_path: Path
) -> None:
    configure(own_redis, maxmemory_policy="allkeys-lru")
    deployment = Deployment(own_redis.url, "evicting:", tmp_path)
    await deployment.start()
    try:
        web = await deployment.web()
        worker_port = free_port()
        worker = deployment.worker("worker.1", METRICS_PORT=str(worker_port))
        urls = {
            web: f"http://127.0.0.1:{deployment.port}",
            worker: f"http://127.0.0.1:{worker_port}",
        }
        for process, url in urls.items():
            body = await readyz_until(url, 503, process)
            assert body["maxmemory_policy"] == "allkeys-lru", body
            assert "noeviction" in body["error"], body
            line = await wait_for_log(process, "maxmemory-policy allkeys-lru")
            assert "Set maxmemory-policy to noeviction" in line, line

        configure(own_redis, maxmemory_policy="noeviction")
        for process, url in urls.items():
            body = await readyz_until(url, 200, process)
            assert body == {"ok": True, "redis": "reachable", "scripts": "loaded"}
            said = [line for line in process.log().splitlines() if "allkeys-lru" in line]
            assert len(said) == 1, f"one line, not one per probe: {said}"
        assert "Traceback" not in deployment.logs_text()
    finally:
        await deployment.stop()


async def test_a_redis_that_hides_config_gets_a_warning_not_a_failure(tmp_path: Path) -> None:
    server = RedisServer(
        directory=tmp_path / "redis", extra_args=["--rename-command", "CONFIG", ""]
    )
    server.start()
    deployment = Deployment(server.url, "managed:", tmp_path)
    await deployment.start()
    try:
        web = await deployment.web()
        body = await readyz_until(f"http://127.0.0.1:{deployment.port}", 200, web)
        assert body["maxmemory_policy"] == "unknown", body
        line = await wait_for_log(web, "maxmemory-policy")
        assert "make sure it is noeviction" in line, line
    finally:
        await deployment.stop()
        server.stop()
