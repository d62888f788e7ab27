"""Grants: an approval that also lets later calls like it run without a card, for a while.

A person picks a grant on a card ("`delete_user` in #ops for 1 hour", or "these exact arguments
for 24 hours"); the decision script approves the call and creates the grant in the same step
(`runtime/record/lua/choices.lua`). A grant covers later calls in the same channel by the same
agent of the same tool (an `arguments` grant: only with the same call digest). Whether it may
cover one is checked at that call (`runtime.grants.check`); using it, revoking it and letting it
end are here (`runtime/grants/lua/`).

Keys (`runtime.db.keys`): `grant:<id>`, a hash of `grant` (JSON, `Grant`) and `uses`, expiring at
its end; `grants:<channel>`, a sorted set of the channel's grant ids by end time (one per shard
on a cluster: a grant lives in the shard of the run that created it, and `grants:<channel>:shards`
in the channel's shard names the shards to read, `note_grant_shard`). A deployment
(one `REDIS_KEY_PREFIX`) serves one Slack workspace, so channel ids do not collide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.audit.events import AuditEvent
from runtime.db.clock import LATEST
from runtime.db.keys import Keys, Shard
from runtime.db.lua import Key, ScriptCall, declare
from runtime.db.replication import NO_REPLICAS, Replication
from runtime.record.choices import GRANT_ID_PATTERN, GrantRef, GrantScope
from runtime.record.once import OnceScript, once_body

GRANT_CHOICES: tuple[tuple[GrantScope, int], ...] = (
    ("tool", 3600),
    ("tool", 8 * 3600),
    ("arguments", 24 * 3600),
)
"""What a card offers (scope, seconds), where the call's rule allows that long."""
GRANT_SHARDS_KEPT_SECONDS = max(seconds for _scope, seconds in GRANT_CHOICES) + 60
"""How long a channel's list of grant shards outlives the last grant noted in it."""


class Grant(BaseModel):
    """One grant as stored (written by the decision script)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=GRANT_ID_PATTERN)
    scope: GrantScope
    channel: str
    agent: str
    tool: str
    mcp_server: str | None = None
    """The MCP server of the granted call's tool (None: a function tool); a grant covers only
    calls on the same server, as a digest does."""
    digest: str | None = None
    """Only for `arguments` grants: the digest of the approved call."""
    user_id: str
    """Who granted it."""
    user_name: str | None = None
    team: str | None = None
    """The granter's Slack team, where known."""
    outside: bool = False
    """The granter is no member of the installing workspace: the grant covers only calls whose
    rule lets such people decide (`runtime.grants.check`)."""
    at: float
    ends_at: float
    seconds: int
    run_id: str
    approval_id: str
    uses: int = 0

    def covers(
        self, *, channel: str, agent: str, tool: str, mcp_server: str | None, digest: str
    ) -> bool:
        same = (self.channel, self.agent, self.tool, self.mcp_server) == (
            channel,
            agent,
            tool,
            mcp_server,
        )
        return same and (self.scope == "tool" or self.digest == digest)

    def ref(self) -> GrantRef:
        return GrantRef(
            id=self.id,
            scope=self.scope,
            ends_at=self.ends_at,
            user_id=self.user_id,
            user_name=self.user_name,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Use(ScriptCall):
    """Using a grant (`runtime/grants/lua/use.lua`)."""

    grant: Key
    audit: Key
    run_id: str
    details: str
    event: str
    call_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Revoke(ScriptCall):
    """Revoking a grant (`runtime/grants/lua/revoke.lua`)."""

    grant: Key
    channel_grants: Key
    audit: Key
    grant_id: str
    channel: str
    user_id: str
    user_name: str
    event: str
    team: str


# Counted and audited once per call, however often redis-py sends it.
USE = declare(Use, "runtime.grants", "use", frame=once_body)
REVOKE = declare(Revoke, "runtime.grants", "revoke", frame=once_body)


async def note_grant_shard(redis: aioredis.Redis, keys: Keys, channel: str, grant_id: str) -> None:
    """On a cluster, before the decision script may create grant `grant_id` in `channel`: name
    its shard in the channel's list, so that a call's lookup reads one key (and the shards it
    names) rather than all `REDIS_SHARDS`. Written first, the list never misses a grant; a
    shard named for a grant that was not made costs a lookup one empty read."""
    if keys.shard_count == 1:
        return
    key = keys.grants.shards(channel)
    async with redis.pipeline(transaction=False) as pipe:
        pipe.sadd(key, keys.shard_of(grant_id).index)
        # Every grant is one of GRANT_CHOICES (at most as long), so each note leaves the list
        # outliving the grants it named before as well.
        pipe.expire(key, GRANT_SHARDS_KEPT_SECONDS)
        await pipe.execute()


class GrantStore:
    def __init__(
        self, redis: aioredis.Redis, keys: Keys, *, replication: Replication = NO_REPLICAS
    ) -> None:
        self._redis = redis
        self._keys = keys
        self._replication = replication
        self._use = OnceScript(redis, keys, USE)
        self._revoke = OnceScript(redis, keys, REVOKE)

    def new_id(self, run_id: str) -> str:
        """An id for a grant that a decision on `run_id` creates (in the run's shard)."""
        return self._keys.grants.new_id(run_id)

    async def active(self, channel: str) -> list[Grant]:
        """The channel's grants that have not ended, soonest end first."""
        # Redis's clock, as the `use` script that decides has it: a worker whose clock runs ahead
        # must not miss a grant that is still on. Carried forward from the run's claim, it
        # costs no command (`LATEST`). A grant's hash expires at its end; the decision script
        # prunes ended entries.
        now = await LATEST.read(self._redis)
        shards = await self._shards_with_grants(channel)
        if not shards:
            return []
        async with self._redis.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.zrange(shard.channel_grants(channel), f"({now}", "+inf", byscore=True)
            replies: list[Any] = await pipe.execute()
        grants = []
        for grant_id in [grant_id for ids in replies for grant_id in ids]:
            grant = await self.get(grant_id.decode())
            if grant is not None:
                grants.append(grant)
        return sorted(grants, key=lambda grant: grant.ends_at)

    async def _shards_with_grants(self, channel: str) -> list[Shard]:
        if self._keys.shard_count == 1:
            return [self._keys.shard(0)]
        named: Any = await self._redis.smembers(self._keys.grants.shards(channel))
        indexes = {int(i) for i in named if i.isdigit() and int(i) < self._keys.shard_count}
        return [self._keys.shard(index) for index in sorted(indexes)]

    async def get(self, grant_id: str) -> Grant | None:
        raw: Any = await self._redis.hmget(self._keys.grants.grant(grant_id), ["grant", "uses"])
        return _grant(raw[0], raw[1])

    async def use(
        self, grant: Grant, run_id: str, *, call_id: str, **details: str | int | None
    ) -> Grant | None:
        """Count one more call covered by `grant`; None if it was revoked or has ended. The
        same call again (`run_id`, `call_id`) is answered as the first time, not counted again."""
        reply = await self._use(
            Use(
                grant=self._keys.grants.grant(grant.id),
                audit=self._keys.shard_of(grant.id).audit,
                run_id=run_id,
                details=json.dumps({"call_id": call_id, **details}),
                event=AuditEvent.GRANT_USED,
                call_id=call_id,
            )
        )
        return _grant(reply[0], reply[1]) if reply else None

    async def note_line(self, grant_id: str, ends_at: float, channel: str, ts: str) -> None:
        """Where a quiet line of the grant was posted (kept until the grant ends)."""
        key = self._keys.grants.lines(grant_id)
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.sadd(key, f"{channel}:{ts}")
            pipe.expireat(key, int(ends_at) + 1)
            await pipe.execute()

    async def lines(self, grant_id: str) -> list[tuple[str, str]]:
        """Each quiet line of the grant: (channel, ts)."""
        found: Any = await self._redis.smembers(self._keys.grants.lines(grant_id))
        lines = [member.decode().partition(":") for member in found]
        return sorted((channel, ts) for channel, _, ts in lines if channel and ts)

    async def revoke(
        self,
        grant_id: str,
        *,
        channel: str,
        user_id: str,
        user_name: str | None,
        team: str | None = None,
    ) -> Grant | None:
        """End a grant of `channel` now; None if there is no such grant (ended, revoked)."""
        shard = self._keys.shard_of(grant_id)
        reply = await self._revoke(
            Revoke(
                grant=self._keys.grants.grant(grant_id),
                channel_grants=shard.channel_grants(channel),
                audit=shard.audit,
                grant_id=grant_id,
                channel=channel,
                user_id=user_id,
                user_name=user_name or "",
                event=AuditEvent.REVOKED,
                team=team or "",
            )
        )
        # A revocation a failover could undo would let the grant approve calls again.
        await self._replication.confirm()
        return _grant(reply[0], reply[1]) if reply else None


def _grant(raw: bytes | None, uses: bytes | int | None) -> Grant | None:
    """A stored grant; None when absent or written by a version this one cannot read (fail
    closed: the call asks a person)."""
    if raw is None:
        return None
    try:
        return Grant.model_validate({**json.loads(raw), "uses": int(uses or 0)})
    except (ValidationError, ValueError):
        return None
