"""Connecting to a Redis Cluster (`REDIS_CLUSTER=true`), and choosing between it and one Redis.

`REDIS_URL` names any node; redis-py's cluster client finds the others, routes each command to
the node holding its key's slot and follows the cluster when slots move or a replica is
promoted. The keys are laid out so that every script and transaction touches one slot
(`runtime.db.keys`), which is all the code here asks of a client: so the cluster client is handed
around as the `redis.asyncio.Redis` it stands in for.
"""

from __future__ import annotations

from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster

from runtime.db.connection import ClientOptions, redis_kwargs


class _Cluster(RedisCluster):
    """redis-py's cluster client, finding the stream of XREAD and XREADGROUP itself.

    Their keys can move in the command, and redis-py asks a node which they are (`COMMAND
    GETKEYS`) before every read: a round trip per read, over one connection shared by all
    callers, which under concurrent blocking reads fails with a connection closed under it.
    Our reads name one stream (`runtime.db.keys`): the first after `STREAMS`.
    """

    async def _determine_slot(self, command: str, *args: Any) -> int:
        if str(command).upper() in ("XREAD", "XREADGROUP"):
            words = [a.decode() if isinstance(a, bytes) else str(a) for a in args]
            if "STREAMS" in (upper := [w.upper() for w in words]):
                streams = args[upper.index("STREAMS") + 1 :]
                slots = {self.keyslot(key) for key in streams[: len(streams) // 2]}
                if len(slots) == 1:
                    return slots.pop()
        return await super()._determine_slot(command, *args)


def connect_cluster(url: str, options: ClientOptions | None = None) -> aioredis.Redis:
    """A cluster client with the same timeouts, retries and TLS checks as `connect`'s.

    `max_connections` is per node. A worker keeps one blocking read per shard in flight
    (`runtime.jobs.queue`), so each node needs about `REDIS_SHARDS / nodes` more than on one Redis.
    """
    kwargs = redis_kwargs(url, options or ClientOptions())
    return cast(aioredis.Redis, _Cluster.from_url(url, **kwargs))
