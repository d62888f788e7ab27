"""Where a stream follower starts, while no Redis answers: it waits, it does not crash."""

from __future__ import annotations

import asyncio

from runtime.db.cluster import connect_cluster
from runtime.db.local import free_port
from runtime.db.streams import stream_tail
from runtime.process.shutdown import Shutdown


async def test_a_cluster_with_no_node_answering_is_waited_for_until_shutdown() -> None:
    # redis-py's cluster client says so with RedisClusterException, which is no RedisError: the
    # Home tab watch died of it at a web's stop (seen once in CI, teardown of a cluster test).
    # Our client (`runtime.db.cluster`) raises ClusterUnavailable, a RedisError, instead.
    cluster = connect_cluster(f"redis://127.0.0.1:{free_port()}")
    stopping = Shutdown()
    asyncio.get_running_loop().call_later(1.5, stopping.set)
    try:
        tail = await asyncio.wait_for(
            stream_tail(cluster, "audit", stopping, follower="test"), timeout=10
        )
    finally:
        await cluster.aclose()
    assert tail == "0-0"
