"""Whether Redis may evict Countersign's keys.

Under any `maxmemory-policy` but `noeviction`, a Redis at its `maxmemory` makes room by deleting
keys: other data pushes out a waiting run, the job stream with its consumer group, the whole
audit trail. Under `noeviction` it refuses writes instead, which every caller already turns into
"try again". So both processes read the policy once Redis answers and on each `/readyz`: any
other policy fails readiness, and the log says, once per change, what to set. A managed Redis
that hides `CONFIG` cannot be asked: that is a warning, not a failure.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import redis.asyncio as aioredis
from redis.exceptions import RedisError, ResponseError

log = logging.getLogger(__name__)

SAFE_POLICY = "noeviction"
SETTING = "maxmemory-policy"

HIDDEN = "unknown"
"""What `/readyz` says of a Redis that refuses `CONFIG GET` (it may be renamed or disabled)."""


async def read_eviction_policy(redis: aioredis.Redis) -> str:
    """Redis's `maxmemory-policy`, or `HIDDEN`. On a cluster, its default node's (every node of
    a cluster is configured alike by its provider)."""
    try:
        reply = await redis.config_get(SETTING)
    except ResponseError:
        return HIDDEN
    value = next(iter(reply.values()), None) if reply else None
    if isinstance(value, bytes):
        value = value.decode()
    return value or HIDDEN


def may_evict(policy: str) -> bool:
    return policy not in (SAFE_POLICY, HIDDEN)


@dataclass(kw_only=True)
class EvictionPolicyLog:
    """One log line each time the policy a process sees changes (a probe every few seconds
    must not repeat it)."""

    last: str | None = None

    async def check(self, redis: aioredis.Redis) -> None:
        """Read the policy and say what it means, once Redis answers (at start)."""
        # Away again: the next /readyz reads it, and the wait for Redis says why.
        with contextlib.suppress(RedisError):
            self.note(await read_eviction_policy(redis))

    def note(self, policy: str) -> None:
        if policy == self.last:
            return
        before, self.last = self.last, policy
        if may_evict(policy):
            log.error(
                "Redis has %s %s: at its maxmemory it deletes keys, waiting runs, the job queue "
                "and the audit trail among them. Set %s to %s (CONFIG SET %s %s, or in your "
                "Redis provider's settings); until then /readyz fails.",
                SETTING,
                policy,
                SETTING,
                SAFE_POLICY,
                SETTING,
                SAFE_POLICY,
            )
        elif policy == HIDDEN:
            log.warning(
                "Redis does not let Countersign read its %s (CONFIG is disabled, as on many "
                "managed services): make sure it is %s, or waiting runs, the job queue and the "
                "audit trail may be evicted.",
                SETTING,
                SAFE_POLICY,
            )
        elif before is not None:
            log.info("Redis has %s %s now: nothing of Countersign's is evicted", SETTING, policy)
