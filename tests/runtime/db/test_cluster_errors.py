"""A Redis Cluster's client fails as one Redis's does: with a `RedisError`, on every path a
command takes, so every `except RedisError` here handles a cluster gone or refusing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import redis.asyncio.connection
from redis.exceptions import ClusterDownError, RedisClusterException, RedisError

from runtime.db.cluster import (
    ClusterUnavailable,
    UnroutableCommand,
    connect_cluster,
    redis_errors_only,
)
from runtime.db.local import free_port
from runtime.jobs.outages import redis_away
from tests.support.redis_cluster import LocalCluster

Call = Callable[[aioredis.Redis], Awaitable[object]]


async def _script(redis: aioredis.Redis) -> object:
    return await redis.register_script("return 1")(keys=["{t}a"])


async def _pipeline(redis: aioredis.Redis) -> object:
    async with redis.pipeline(transaction=False) as pipe:
        pipe.get("{t}a")
        pipe.hget("{t}b", "f")
        return await pipe.execute()


async def _transaction(redis: aioredis.Redis) -> object:
    async with redis.pipeline(transaction=True) as pipe:
        pipe.get("{t}a")
        pipe.set("{t}b", "1")
        return await pipe.execute()


async def _blocking_read(redis: aioredis.Redis) -> object:
    return await redis.xread({"{t}stream": "0-0"}, count=1, block=100)


CALLS: dict[str, Call] = {
    "command": lambda redis: redis.get("{t}a"),
    "ping": lambda redis: redis.ping(),
    "script": _script,
    "pipeline": _pipeline,
    "transaction": _transaction,
    "blocking read": _blocking_read,
    "initialize": lambda redis: redis.initialize(),
}


@pytest.fixture
async def nowhere() -> AsyncIterator[aioredis.Redis]:
    """A cluster client whose only node has nothing listening."""
    client = connect_cluster(f"redis://127.0.0.1:{free_port()}", None)
    yield client
    await client.aclose()


@pytest.mark.parametrize("call", list(CALLS), ids=list(CALLS))
async def test_a_cluster_with_no_node_answering_fails_with_a_redis_error(
    nowhere: aioredis.Redis, call: str
) -> None:
    # redis-py says so with RedisClusterException, which is no RedisError: it escaped every
    # `except RedisError` (the Home tab watch died of it at a web's stop).
    with pytest.raises(RedisError) as raised:
        await CALLS[call](nowhere)
    assert isinstance(raised.value, ClusterUnavailable)
    assert isinstance(raised.value.__cause__, RedisClusterException), "the original kept"
    assert redis_away(raised.value) is not None, "a job retries it in place"


def test_a_cluster_down_is_redis_away_for_a_job() -> None:
    # A primary failed and not replaced yet: every node answers CLUSTERDOWN until it is back.
    down = ClusterDownError("CLUSTERDOWN The cluster is down")
    wrapped = RuntimeError("Error running tool")
    wrapped.__cause__ = down
    assert redis_away(wrapped) is down


def test_a_connection_closed_under_a_command_is_the_cluster_unavailable() -> None:
    # Told "the cluster is down", redis-py closes every connection, also those other commands
    # use: they fail with AttributeError in its connection code (`self._writer` is None).
    closed_under_it = compile("None.writelines", redis.asyncio.connection.__file__, "exec")
    with pytest.raises(ClusterUnavailable) as raised, redis_errors_only():
        exec(closed_under_it)
    assert isinstance(raised.value.__cause__, AttributeError)
    assert redis_away(raised.value) is not None
    with pytest.raises(AttributeError), redis_errors_only():
        exec("None.writelines")  # raised elsewhere: a bug, raised as it is


@pytest.fixture
async def cluster_client(redis_cluster: LocalCluster) -> AsyncIterator[aioredis.Redis]:
    client = connect_cluster(redis_cluster.url)
    await client.ping()  # a new client sends its first command to any node, unrouted
    yield client
    await client.aclose()


@pytest.mark.cluster
async def test_a_command_it_cannot_route_fails_with_a_redis_error_that_is_no_outage(
    cluster_client: aioredis.Redis,
) -> None:
    with pytest.raises(UnroutableCommand, match="same key slot") as raised:
        await cluster_client.xread({"{a}stream": "0-0", "{b}stream": "0-0"})
    assert isinstance(raised.value.__cause__, RedisClusterException)
    assert redis_away(raised.value) is None, "a bug: not retried as if Redis were away"
    with pytest.raises(UnroutableCommand):
        async with cluster_client.pipeline(transaction=True) as pipe:
            pipe.set("{a}x", "1")
            pipe.set("{b}x", "1")
            await pipe.execute()


@pytest.mark.cluster
async def test_a_cluster_whose_nodes_all_stopped_fails_with_a_redis_error_until_they_are_back(
    tmp_path: Path,
) -> None:
    with LocalCluster(directory=tmp_path / "cluster", durable=True) as cluster:
        client = connect_cluster(cluster.url)
        try:
            await client.set("{t}a", "before")
            for node in cluster.nodes:
                node.stop()
            for name, call in CALLS.items():
                if name == "initialize":
                    # From redis-py 8.2 a client that knew the cluster keeps that topology when
                    # no node answers a refresh (it logs it); the commands then fail, below.
                    continue
                with pytest.raises(ClusterUnavailable):
                    await call(client)
            cluster.restart(*cluster.nodes)
            assert await client.get("{t}a") == b"before", "the same client, once they are back"
        finally:
            await client.aclose()
