"""The operator's endpoints on the web process: `GET /metrics` and `GET /readyz`.

`/healthz` (`bot.web`) stays the liveness check: the process answers and Redis pings. `/readyz`
also wants the run record's scripts in Redis's cache (`runtime.readiness`). `/metrics` is this
process's counters (`runtime.metrics`) plus what Redis holds right now (`runtime.state_gauges`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from runtime.keys import Keys
from runtime.metrics import Scrape, metrics_response
from runtime.readiness import check_readiness
from runtime.state_gauges import StateGauges, StateSnapshot, read_state

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Operations:
    redis: aioredis.Redis
    keys: Keys

    async def metrics(self, request: web.Request) -> web.Response:
        snapshot: StateSnapshot | None
        try:
            snapshot = await read_state(self.redis, self.keys)
        except RedisError:
            log.warning("metrics: Redis unreachable; its gauges are left out of this scrape")
            snapshot = None
        return metrics_response(Scrape((StateGauges(snapshot),)))

    async def readyz(self, request: web.Request) -> web.Response:
        readiness = await check_readiness(self.redis)
        return web.json_response(readiness.body(), status=200 if readiness.ready else 503)


def add_operations(app: web.Application, *, redis: aioredis.Redis, keys: Keys) -> None:
    operations = Operations(redis=redis, keys=keys)
    app.router.add_get("/metrics", operations.metrics)
    app.router.add_get("/readyz", operations.readyz)
