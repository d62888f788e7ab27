"""Which Redis primary a process talks to, and whose history it carries.

Every primary has a replication id (`INFO replication`: `master_replid`) and an offset, the
bytes of its replication stream so far (`master_repl_offset`). A replica promoted by a failover
takes a new id and keeps the old one as `master_replid2`, with `second_repl_offset`: the first
byte of the old primary's stream it never received. So a write seen on primary `R` at offset `o`
(or earlier) survived the promotion of `P` when `P` carries `R`'s history beyond `o`; otherwise
nothing can be said from the ids alone (another failover in between, a restart) and the write
is looked for again on `P` (`runtime.failover.decisions`, `runtime.failover.calls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

NO_ID = "0" * 40
"""`master_replid2` of a primary that was never promoted."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Primary:
    """One server's `INFO replication`, as far as a failover goes."""

    replid: str
    offset: int
    replid2: str = NO_ID
    second_offset: int = -1
    """The first byte of `replid2`'s stream this server does not hold (-1: none)."""
    role: str = "master"
    replicas: int = 0
    """Replicas connected to it now."""

    @classmethod
    def of(cls, info: Mapping[str, Any]) -> Primary:
        return cls(
            replid=str(info.get("master_replid", "")),
            offset=int(info.get("master_repl_offset", 0)),
            replid2=str(info.get("master_replid2", NO_ID)),
            second_offset=int(info.get("second_repl_offset", -1)),
            role=str(info.get("role", "")),
            replicas=int(info.get("connected_slaves", 0)),
        )

    @property
    def is_primary(self) -> bool:
        """A replica answers too (a demoted primary, a stale connection): only a primary's
        answers tell what survived."""
        return self.role == "master" and bool(self.replid)

    def holds(self, replid: str | None, offset: int) -> bool:
        """Whether this primary's data includes everything written on the primary `replid`
        up to `offset` of its stream (False: not known; look)."""
        if replid is None:
            return False
        if replid == self.replid:
            return offset <= self.offset
        return replid == self.replid2 and replid != NO_ID and offset < self.second_offset

    def succeeds(self, replid: str) -> bool:
        """This primary was promoted in place of `replid`."""
        return replid != NO_ID and replid == self.replid2


async def read_primary(redis: aioredis.Redis) -> Primary:
    """The identity of the server `redis` reaches now (one `INFO replication`)."""
    return Primary.of(await redis.info("replication"))
