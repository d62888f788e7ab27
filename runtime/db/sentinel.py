"""Connecting through Redis Sentinel when `REDIS_SENTINELS` is set, else to `REDIS_URL`.

The client asks the Sentinels for the current primary before each new connection and drops its
connections to a primary that was demoted (redis-py's `Sentinel.master_for`), so the processes
follow a failover on their own: a command in flight when the primary dies fails like any Redis
outage (retried with backoff, or "try again" to a person), and the next goes to the new primary.

`REDIS_URL` then gives only what Sentinel does not: the scheme (`rediss://` for TLS, checked as
`REDIS_TLS_VERIFY` and `REDIS_TLS_CA_FILE` say), the password and the database. The timeouts,
retries and pool size are those of `runtime.db.connection.ClientOptions`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

import redis.asyncio as aioredis
from redis.asyncio.connection import BlockingConnectionPool
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime.db.connection import ClientOptions, keepalive, tls_kwargs
from runtime.settings import RuntimeSettings


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Sentinel's pool, waiting for a free connection as `connect()`'s pool does instead of
    failing at once when a burst of clicks wants more connections than it holds."""


class SentinelRedis(aioredis.Redis):
    """The primary's client; closing it also closes its connections to the Sentinels."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pool = self.connection_pool
        await super().aclose(close_connection_pool)
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


def connect_sentinel(
    settings: RuntimeSettings, master: str, options: ClientOptions | None = None
) -> aioredis.Redis:
    """The primary that `REDIS_SENTINELS` name for `master` (`REDIS_SENTINEL_MASTER`),
    followed across failovers."""
    options = options or ClientOptions()
    url = urlsplit(settings.effective_redis_url)
    timeouts: dict[str, Any] = {
        "socket_timeout": options.socket_timeout,
        "socket_connect_timeout": options.connect_timeout,
    }
    credentials: dict[str, Any] = {
        "username": unquote(url.username) if url.username else None,
        "password": unquote(url.password) if url.password else None,
    }
    tls: dict[str, Any] = {"ssl": True, **tls_kwargs(options)} if url.scheme == "rediss" else {}
    database = url.path.lstrip("/")
    sentinel = Sentinel(
        settings.sentinel_addresses,
        # Sentinels usually have no password of their own, but speak TLS where Redis does. One
        # try each: there are several to ask, and the client's own retries come around again.
        sentinel_kwargs={**timeouts, **tls, "retry": Retry(NoBackoff(), retries=0)},
        **timeouts,
    )
    client: aioredis.Redis = sentinel.master_for(
        master,
        redis_class=SentinelRedis,
        connection_pool_class=_BlockingSentinelPool,
        db=int(database) if database.isdigit() else 0,
        **keepalive(),
        retry=Retry(ExponentialWithJitterBackoff(base=0.1, cap=2.0), retries=options.retries),
        retry_on_error=[RedisConnectionError, RedisTimeoutError],
        max_connections=options.max_connections,
        timeout=options.socket_timeout,
        client_name="countersign",
        **credentials,
        **tls,
    )
    return client
