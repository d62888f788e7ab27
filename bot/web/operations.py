"""The operator's endpoints on the web process: `GET /metrics` and `GET /readyz`.

`/healthz` (`bot.web.app`) stays the liveness check: the process answers and Redis pings. `/readyz`
also wants the run record's scripts in Redis's cache and a Redis that never evicts keys
(`runtime.readiness`), a bot token Slack does not refuse (`bot.slack.bot_token`), and in
Socket Mode a connection to Slack (`socket_mode`).
`/metrics` is this process's counters (`runtime.metrics`) plus what Redis holds right now
(`runtime.record.gauges`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError

from bot.web.socket_mode import SocketModeConnection, SocketState
from runtime.db import EvictionPolicyLog, Keys
from runtime.metrics import Scrape, metrics_response
from runtime.process import Credentials
from runtime.readiness import check_readiness, with_credentials
from runtime.record import StateGauges, StateSnapshot, read_state

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Operations:
    redis: aioredis.Redis
    keys: Keys
    eviction_log: EvictionPolicyLog = field(default_factory=EvictionPolicyLog)
    """The process's: also told at start (`bot.web.app`), so a probe repeats no line."""
    socket: SocketModeConnection | None = None
    """In Socket Mode, ready only once connected (`bot.web.socket_mode`)."""
    credentials: Credentials | None = None
    """The bot token: not ready while Slack refuses it (`bot.slack.bot_token`)."""

    async def metrics(self, request: web.Request) -> web.Response:
        snapshot: StateSnapshot | None
        try:
            snapshot = await read_state(self.redis, self.keys)
        except RedisError:
            log.warning("metrics: Redis unreachable; its gauges are left out of this scrape")
            snapshot = None
        return metrics_response(Scrape((StateGauges(snapshot),)))

    async def readyz(self, request: web.Request) -> web.Response:
        readiness = await check_readiness(self.redis, eviction_log=self.eviction_log)
        body, ready = readiness.body(), readiness.ready
        if self.socket is not None:
            state = await self.socket.state()
            body["socket_mode"] = str(state)
            if state is not SocketState.CONNECTED:
                body["ok"] = ready = False
        if not await with_credentials(body, self.credentials):
            ready = False
        return web.json_response(body, status=200 if ready else 503)


def add_operations(
    app: web.Application,
    *,
    redis: aioredis.Redis,
    keys: Keys,
    eviction_log: EvictionPolicyLog | None = None,
    socket: SocketModeConnection | None = None,
    credentials: Credentials | None = None,
) -> None:
    operations = Operations(
        redis=redis,
        keys=keys,
        eviction_log=eviction_log or EvictionPolicyLog(),
        socket=socket,
        credentials=credentials,
    )
    app.router.add_get("/metrics", operations.metrics)
    app.router.add_get("/readyz", operations.readyz)
