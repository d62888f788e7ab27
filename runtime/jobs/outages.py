"""When a job fails because Redis is away, not because the job is at fault: the errors that say
so, and the setting an operator checks for each (`runtime.jobs.consumer` retries such a job in
place instead of spending one of its deliveries)."""

from __future__ import annotations

from redis.exceptions import ClusterDownError, OutOfMemoryError, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from runtime.db.cluster import ClusterUnavailable
from runtime.db.replication import NotReplicated
from runtime.process.causes import caused_by

_AWAY: tuple[type[RedisError], ...] = (
    NotReplicated,
    RedisConnectionError,
    RedisTimeoutError,
    OutOfMemoryError,
    ClusterUnavailable,
    ClusterDownError,
)
_SETTING_TO_CHECK: dict[type[BaseException], str] = {
    NotReplicated: "REDIS_MIN_REPLICAS",
    OutOfMemoryError: "Redis's maxmemory",
}


def redis_away(error: BaseException) -> BaseException | None:
    """What in `error` says Redis is away rather than the job at fault, if anything: replicas
    that do not confirm, a Redis that does not answer, one full that refuses writes (under
    `noeviction`, `runtime.db.eviction`), or a cluster none of whose nodes answers or whose
    failed primary is not replaced yet ("the cluster is down"). The SDK wraps what a tool
    raises, so the causes are searched too."""
    for kind in _AWAY:
        if (found := caused_by(error, kind)) is not None:
            return found
    return _full_inside_a_script(error)


def _full_inside_a_script(error: BaseException) -> OutOfMemoryError | None:
    """Redis 6.2 reports a write a full Redis refused inside a Lua script as the script's error
    (`Error running script ...: -OOM command not allowed ...`), which redis-py cannot tell
    from a bug in the script; Redis 7 answers `OOM ...` itself, an `OutOfMemoryError`."""
    found = caused_by(error, ResponseError)
    if found is not None and "-OOM " in str(found):
        return OutOfMemoryError(str(found))
    return None


def setting_to_check(away: BaseException) -> str:
    """The setting (or Redis's own) that an operator looks at for `away`."""
    return _SETTING_TO_CHECK.get(type(away), "REDIS_URL")
