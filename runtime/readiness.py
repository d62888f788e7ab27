"""Is a process ready for traffic? Redis answers, and every script of the run record is in its
script cache.

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
from redis.exceptions import RedisError, ResponseError

from runtime import run_record


@dataclass(frozen=True, kw_only=True, slots=True)
class Readiness:
    redis_reachable: bool
    missing_scripts: tuple[str, ...] = ()
    error: str | None = None
    """Redis's answer when it refused to load a script (it names the cause)."""

    @property
    def ready(self) -> bool:
        return self.redis_reachable and not self.missing_scripts

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
        return {"ok": True, "redis": "reachable", "scripts": "loaded"}


def script_sha(body: str) -> str:
    return hashlib.sha1(body.encode(), usedforsecurity=False).hexdigest()


async def check_readiness(
    redis: aioredis.Redis, scripts: Mapping[str, str] = run_record.SCRIPTS
) -> Readiness:
    try:
        await redis.ping()
    except RedisError:
        return Readiness(redis_reachable=False)
    names = list(scripts)
    try:
        loaded = await redis.script_exists(*(script_sha(scripts[n]) for n in names))
    except ResponseError as error:
        return Readiness(redis_reachable=True, missing_scripts=tuple(names), error=str(error))
    except RedisError:
        return Readiness(redis_reachable=False)
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
            return Readiness(redis_reachable=False)
    return Readiness(redis_reachable=True, missing_scripts=tuple(missing), error=error_text)
