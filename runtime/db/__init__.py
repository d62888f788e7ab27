"""Redis: one server, Sentinel or Cluster; keys, clock, replication waits, Lua files, a local
server.

Floor 2 (storage): imports `runtime.settings` beside it and the values floor (`process`).
"""

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
