"""The Redis client every process uses, as the settings ask: a Redis Cluster's
(`REDIS_CLUSTER`, `runtime.db.cluster`), a primary found through Sentinel (`REDIS_SENTINELS`,
`runtime.db.sentinel`), or one Redis at `REDIS_URL` (`runtime.db.connection`), each with
the same timeouts, retries and TLS checks."""

from __future__ import annotations

import redis.asyncio as aioredis

from runtime.db.cluster import connect_cluster
from runtime.db.connection import ClientOptions, connect
from runtime.db.sentinel import connect_sentinel
from runtime.settings import RuntimeSettings


def connect_to(
    settings: RuntimeSettings,
    *,
    socket_timeout: float = 10.0,
    connect_timeout: float = 5.0,
    retries: int = 3,
    max_connections: int = 50,
) -> aioredis.Redis:
    options = ClientOptions(
        tls_verify=settings.redis_tls_verify,
        tls_ca_file=settings.redis_tls_ca_file,
        socket_timeout=socket_timeout,
        connect_timeout=connect_timeout,
        retries=retries,
        max_connections=max_connections,
    )
    if settings.redis_sentinels and (master := settings.redis_sentinel_master):
        return connect_sentinel(settings, master, options)
    connect_one = connect_cluster if settings.redis_cluster else connect
    return connect_one(settings.effective_redis_url, options)
