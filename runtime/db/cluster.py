"""Connecting to a Redis Cluster (`REDIS_CLUSTER=true`), and choosing between it and one Redis.

`REDIS_URL` names any node; redis-py's cluster client finds the others, routes each command to
the node holding its key's slot and follows the cluster when slots move or a replica is
promoted. The keys are laid out so that every script and transaction touches one slot
(`runtime.db.keys`), which is all the code here asks of a client: so the cluster client is handed
around as the `redis.asyncio.Redis` it stands in for, and it fails as one Redis's client does,
with a `RedisError`, which every caller already handles ("try again", a retry in place):

RedisError
├── ClusterUnavailable   no node answered, or the slots are not all served: redis-py's
│                        `RedisClusterException` from finding the cluster, `SlotNotCoveredError`,
│                        `RedisClusterUnreachableError` (redis-py 8.2 and later), a
│                        `ConnectionError` once redis-py's own retries are spent;
│                        or a connection closed under a command (`AttributeError` in redis-py's
│                        connection code: told "the cluster is down", redis-py closes every
│                        connection, also those other commands are using)
├── UnroutableCommand    a command the client cannot send to one node (keys of several slots, no
│                        key): any other `RedisClusterException`, a bug here, not an outage
└── (redis-py's own)     TimeoutError, ClusterDownError ("the cluster is down",
                         while a failed primary is not yet replaced), ...

Neither `RedisClusterException` nor that `AttributeError` is a `RedisError`: they escaped every
`except RedisError` (a task dead of it, a click answered with nothing, a traceback per shard).
`_Cluster` and `_Pipeline` turn them into one of the two above, the original as `__cause__`, where
a call leaves redis-py: a command (scripts and blocking reads are commands too), discovering the
cluster (`initialize`, also before a pipeline), a pipeline's commands and its `execute`.
Inside redis-py nothing changes: its own retries see its own exceptions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import redis.asyncio as aioredis
import redis.asyncio.connection
import redis.exceptions
from redis.asyncio.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisClusterException, RedisError, SlotNotCoveredError

from runtime.db.connection import ClientOptions, redis_kwargs


class ClusterUnavailable(RedisError):
    """No node of the cluster answered, not every slot is served, or a connection was closed
    under the command: Redis is away."""


class UnroutableCommand(RedisError):
    """redis-py's cluster client refused a command it cannot send to one node."""


_CONNECTION_CODE = Path(redis.asyncio.connection.__file__)

_OUTAGES: tuple[type[RedisClusterException], ...] = (
    SlotNotCoveredError,
    # redis-py 8.2 says "no node reachable" with this subclass, from a command as well as from
    # `initialize`; earlier releases have no such class and raise it from `initialize` only.
    *(
        [unreachable]
        if (unreachable := getattr(redis.exceptions, "RedisClusterUnreachableError", None))
        else []
    ),
)


@contextlib.contextmanager
def redis_errors_only() -> Iterator[None]:
    """Raise what redis-py's cluster client raises besides `RedisError`s as the `RedisError`
    it stands for (`ClusterUnavailable`, `UnroutableCommand`), from the original."""
    try:
        yield
    except RedisClusterException as error:
        kind = ClusterUnavailable if isinstance(error, _OUTAGES) else UnroutableCommand
        raise kind(str(error)) from error
    except RedisConnectionError as error:
        # What redis-py raises once its own retries are spent: the node serving the command's
        # slot could not be reached. redis-py 8.2 raises it raw while a refresh of the topology
        # is in its backoff, where earlier releases refreshed and raised the exception above.
        raise ClusterUnavailable(str(error)) from error
    except AttributeError as error:
        if not _raised_in_connection_code(error):
            raise  # ours: a bug, not an outage
        raise ClusterUnavailable("a connection was closed under the command") from error


def _raised_in_connection_code(error: BaseException) -> bool:
    """Whether `error` was raised in redis-py's connection module (its innermost frame)."""
    frames = error.__traceback__
    while frames is not None and frames.tb_next is not None:
        frames = frames.tb_next
    return frames is not None and Path(frames.tb_frame.f_code.co_filename) == _CONNECTION_CODE


class _Cluster(RedisCluster):
    """redis-py's cluster client, failing with `RedisError`s only, and finding the stream of
    XREAD and XREADGROUP itself.

    Their keys can move in the command, and redis-py asks a node which they are (`COMMAND
    GETKEYS`) before every read: a round trip per read, over one connection shared by all
    callers, which under concurrent blocking reads fails with a connection closed under it.
    Our reads name one stream (`runtime.db.keys`): the first after `STREAMS`.
    """

    async def initialize(self, *args: Any, **kwargs: Any) -> RedisCluster:
        try:
            return await super().initialize(*args, **kwargs)
        except RedisClusterException as error:
            # Whatever stops it finding the cluster (no node reachable, slots uncovered, nodes
            # that disagree) passes once the cluster is back: an outage, not a bug.
            raise ClusterUnavailable(str(error)) from error

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with redis_errors_only():
            return await super().execute_command(*args, **kwargs)

    def pipeline(
        self, transaction: Any | None = None, shard_hint: Any | None = None
    ) -> ClusterPipeline:
        if shard_hint:
            raise UnroutableCommand("a cluster pipeline takes no shard_hint")
        # As redis-py's own `pipeline` builds it: the abstract attribute is only its typing's.
        return _Pipeline(self, transaction)  # type: ignore[abstract]

    async def _determine_slot(self, command: str, *args: Any) -> int:
        if str(command).upper() in ("XREAD", "XREADGROUP"):
            words = [a.decode() if isinstance(a, bytes) else str(a) for a in args]
            if "STREAMS" in (upper := [w.upper() for w in words]):
                streams = args[upper.index("STREAMS") + 1 :]
                slots = {self.keyslot(key) for key in streams[: len(streams) // 2]}
                if len(slots) == 1:
                    return slots.pop()
        return await super()._determine_slot(command, *args)


class _Pipeline(ClusterPipeline):
    """redis-py's cluster pipeline, failing with `RedisError`s only (`_Cluster`'s).

    A transaction's command runs at once, when queued, to find its slot (redis-py's
    `TransactionStrategy`), so queueing can fail as well as `execute`. No caller here `watch`es
    a key, so `watch` is left as redis-py's.
    """

    __slots__ = ()

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        with redis_errors_only():
            return super().execute_command(*args, **kwargs)

    async def execute(self, raise_on_error: bool = True, allow_redirections: bool = True) -> Any:
        with redis_errors_only():
            return await super().execute(raise_on_error, allow_redirections)


def connect_cluster(url: str, options: ClientOptions | None = None) -> aioredis.Redis:
    """A cluster client with the same timeouts, retries and TLS checks as `connect`'s, whose
    every failure is a `RedisError`.

    `max_connections` is per node. A worker keeps one blocking read per shard in flight
    (`runtime.jobs.queue`), so each node needs about `REDIS_SHARDS / nodes` more than on one Redis.
    """
    kwargs = redis_kwargs(url, options or ClientOptions())
    return cast(aioredis.Redis, _Cluster.from_url(url, **kwargs))
