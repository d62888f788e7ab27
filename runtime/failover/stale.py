"""Old primaries that Sentinel has replaced but not yet turned into replicas.

When a partition heals, the primary that was cut off still holds what it acknowledged alone, and
still answers as a primary, until Sentinel tells it to replicate from the one promoted in its
place (by default at its next check, up to ten seconds later), which wipes it. A web process
that started in that window, after the one that acknowledged those decisions was killed, reads
them there (`runtime.failover.decisions.AcknowledgedDecisions.seed`): Sentinel lists the old
primary among the replicas, and it answers `role:master` under another replication id.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.connection import Connection, SSLConnection
from redis.asyncio.sentinel import SentinelConnectionPool
from redis.exceptions import RedisError

from runtime.failover.identity import Primary, read_primary

log = logging.getLogger(__name__)

KEPT_OPTIONS = (
    "socket_timeout",
    "socket_connect_timeout",
    "db",
    "socket_keepalive",
    "socket_keepalive_options",
    "username",
    "password",
    "client_name",
)
"""What a connection to one listed server keeps of the primary's (its TLS options besides)."""


@contextlib.asynccontextmanager
async def stale_primaries(
    redis: aioredis.Redis, current: Primary
) -> AsyncIterator[list[tuple[aioredis.Redis, Primary]]]:
    """Clients of the servers Sentinel lists as replicas that still act as a primary other than
    `current`, with their identity; none without Sentinel. Closed on exit."""
    found: list[tuple[aioredis.Redis, Primary]] = []
    pool = redis.connection_pool
    try:
        if isinstance(pool, SentinelConnectionPool):
            listed = await pool.sentinel_manager.discover_slaves(pool.service_name)
            for host, port in listed:
                client = _client(pool, str(host), int(port))
                try:
                    identity = await read_primary(client)
                except RedisError:
                    identity = None
                if identity is None or not identity.is_primary or identity.replid == current.replid:
                    await client.aclose()
                    continue
                log.warning(
                    "%s:%s still acts as a Redis primary (%s): reading its recent decisions",
                    host,
                    port,
                    identity.replid[:8],
                )
                found.append((client, identity))
        yield found
    finally:
        for client, _ in found:
            await client.aclose()


def _client(pool: SentinelConnectionPool, host: str, port: int) -> aioredis.Redis:
    options: dict[str, Any] = {
        k: v for k, v in pool.connection_kwargs.items() if k in KEPT_OPTIONS or k.startswith("ssl")
    }
    tls = issubclass(pool.connection_class, SSLConnection)
    return aioredis.Redis(
        connection_pool=aioredis.ConnectionPool(
            connection_class=SSLConnection if tls else Connection, host=host, port=port, **options
        )
    )
