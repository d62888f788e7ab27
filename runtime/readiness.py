"""Is a process ready for traffic? Redis answers, and every script of the run record is in its
script cache, and it will not evict keys (`runtime.db.eviction`), and the platform it reports to
does not refuse its credentials (`runtime.process.credentials`).

Redis forgets its scripts when it restarts or fails over; redis-py reloads one the first time a
call finds it missing, but a readiness probe should not wait for a person's click to find out
that a script no longer compiles or that scripting is refused. So the check loads any missing
script itself, and reports the ones it could not load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import redis.asyncio as aioredis
from aiohttp import web
from redis.exceptions import RedisError, ResponseError

from runtime.db.eviction import HIDDEN, EvictionPolicyLog, may_evict, read_eviction_policy
from runtime.process.credentials import Credentials
from runtime.record import scripts as run_record


@dataclass(frozen=True, kw_only=True, slots=True)
class Readiness:
    redis_reachable: bool
    missing_scripts: tuple[str, ...] = ()
    error: str | None = None
    """Redis's answer when it refused to load a script (it names the cause)."""
    eviction_policy: str = HIDDEN
    """`maxmemory-policy`: anything but `noeviction` (or hidden) fails readiness."""

    @property
    def ready(self) -> bool:
        return (
            self.redis_reachable
            and not self.missing_scripts
            and not may_evict(self.eviction_policy)
        )

    def body(self) -> dict[str, object]:
        """What `/readyz` answers: what is missing, in words an operator can act on."""
        if not self.redis_reachable:
            return {"ok": False, "redis": "unreachable", "scripts": "unknown"}
        if self.missing_scripts:
            return {
                "ok": False,
                "redis": "reachable",
                "scripts": "missing",
                "missing_scripts": list(self.missing_scripts),
                "error": self.error,
            }
        body: dict[str, object] = {"ok": self.ready, "redis": "reachable", "scripts": "loaded"}
        if may_evict(self.eviction_policy):
            body["maxmemory_policy"] = self.eviction_policy
            body["error"] = "Redis may evict keys: set maxmemory-policy to noeviction."
        elif self.eviction_policy == HIDDEN:
            body["maxmemory_policy"] = HIDDEN
        return body


def script_sha(body: str) -> str:
    return hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()


async def check_readiness(
    redis: aioredis.Redis,
    scripts: Mapping[str, str] = run_record.SCRIPTS,
    *,
    eviction_log: EvictionPolicyLog | None = None,
) -> Readiness:
    """`eviction_log`: the process's, to say in the log when the eviction policy changed."""
    try:
        await redis.ping()
        policy = await read_eviction_policy(redis)
    except RedisError:
        return Readiness(redis_reachable=False)
    if eviction_log is not None:
        eviction_log.note(policy)
    scripts_state = await _load_scripts(redis, scripts)
    if scripts_state is None:
        return Readiness(redis_reachable=False)
    missing, error = scripts_state
    return Readiness(
        redis_reachable=True, missing_scripts=missing, error=error, eviction_policy=policy
    )


async def _load_scripts(
    redis: aioredis.Redis, scripts: Mapping[str, str]
) -> tuple[tuple[str, ...], str | None] | None:
    """The scripts Redis refused to load and why; None if Redis stopped answering."""
    names = list(scripts)
    try:
        loaded = await redis.script_exists(*(script_sha(scripts[n]) for n in names))
    except ResponseError as error:
        return tuple(names), str(error)
    except RedisError:
        return None
    missing: list[str] = []
    error_text: str | None = None
    for name, present in zip(names, loaded, strict=True):
        if present:
            continue
        try:
            await redis.script_load(scripts[name])
        except ResponseError as error:
            missing.append(name)
            error_text = str(error)
        except RedisError:
            return None
    return tuple(missing), error_text


async def readyz_response(
    redis: aioredis.Redis,
    eviction_log: EvictionPolicyLog,
    credentials: Credentials | None = None,
) -> web.Response:
    """`GET /readyz` of either process: 200 when ready, else 503 and what is missing."""
    readiness = await check_readiness(redis, eviction_log=eviction_log)
    body, ready = readiness.body(), readiness.ready
    if not await with_credentials(body, credentials):
        ready = False
    return web.json_response(body, status=200 if ready else 503)


async def with_credentials(body: dict[str, object], credentials: Credentials | None) -> bool:
    """Add to a `/readyz` body what is wrong with the credentials (`{"SLACK_BOT_TOKEN": the
    fix}`); False when they are refused."""
    if credentials is None:
        return True
    refused = await credentials.readiness()
    if refused:
        body.update(refused)
        body["ok"] = False
    return not refused
