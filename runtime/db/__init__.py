"""Redis: one server, Sentinel or Cluster; keys, clock, replication waits, Lua files, a local
server.

The names `bot` uses, loaded on first use (`runtime._faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runtime._faces import lazy_names

if TYPE_CHECKING:
    from runtime.db.client import connect_to
    from runtime.db.connection import (
        BLOCKING_READS_SOCKET_TIMEOUT,
        FIRST_RETRY_SECONDS,
        MAX_RETRY_SECONDS,
        longest_block,
        wait_until_reachable,
        worker_pool_size,
    )
    from runtime.db.eviction import EvictionPolicyLog
    from runtime.db.keys import Keys
    from runtime.db.local import DEMO_KEY_PREFIX, DEMO_REDIS_FOLDER, LocalRedisError, redis_for_demo
    from runtime.db.lua import Key, Registered, ScriptCall, declare, lua_script
    from runtime.db.replication import NotReplicated, Replication
    from runtime.db.streams import stream_tail

_WHERE = {
    "BLOCKING_READS_SOCKET_TIMEOUT": "connection",
    "DEMO_KEY_PREFIX": "local",
    "DEMO_REDIS_FOLDER": "local",
    "EvictionPolicyLog": "eviction",
    "FIRST_RETRY_SECONDS": "connection",
    "Key": "lua",
    "Keys": "keys",
    "LocalRedisError": "local",
    "MAX_RETRY_SECONDS": "connection",
    "NotReplicated": "replication",
    "Registered": "lua",
    "Replication": "replication",
    "ScriptCall": "lua",
    "connect_to": "client",
    "declare": "lua",
    "longest_block": "connection",
    "lua_script": "lua",
    "redis_for_demo": "local",
    "stream_tail": "streams",
    "wait_until_reachable": "connection",
    "worker_pool_size": "connection",
}
__all__ = [
    "BLOCKING_READS_SOCKET_TIMEOUT",
    "DEMO_KEY_PREFIX",
    "DEMO_REDIS_FOLDER",
    "FIRST_RETRY_SECONDS",
    "MAX_RETRY_SECONDS",
    "EvictionPolicyLog",
    "Key",
    "Keys",
    "LocalRedisError",
    "NotReplicated",
    "Registered",
    "Replication",
    "ScriptCall",
    "connect_to",
    "declare",
    "longest_block",
    "lua_script",
    "redis_for_demo",
    "stream_tail",
    "wait_until_reachable",
    "worker_pool_size",
]

__getattr__ = lazy_names(__name__, _WHERE)
