"""People, groups and channels by name in what the command line prints (`@alice`, `#ops`), where
Countersign knows them.

The web process caches each name Slack tells it under `SlackKeys.display_name`
(`bot.slack.directory`: a person's display name, a group's `@handle`, a channel's name; the
console writes its own people's and channel's). The command line has no Slack token, so it reads
that cache and nothing else: an id nobody looked up lately is printed as it is (`UALICE`), never
guessed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from runtime.db.keys import Keys
from runtime.deciders import is_group


def readable(principal: str, cached: str | None) -> str:
    """`@alice` for a person, `@oncall` for a group, `#ops` for a channel; the id if unknown."""
    if not cached:
        return principal
    if principal.startswith(("C", "G")):
        return f"#{cached}"
    return cached if is_group(principal) or cached.startswith("@") else f"@{cached}"


@dataclass(frozen=True, slots=True)
class KnownNames:
    redis: Any
    """A client of the processes' Redis (one server, Sentinel's primary, or a cluster)."""
    keys: Keys

    async def of(self, principals: Iterable[str]) -> Mapping[str, str]:
        """Each principal's readable name (`readable`), in one round trip."""
        unique = list(dict.fromkeys(p for p in principals if p))
        if not unique:
            return {}
        # One GET each: the keys may live in different slots of a cluster.
        async with self.redis.pipeline(transaction=False) as pipe:
            for principal in unique:
                pipe.get(self.keys.slack.display_name(principal))
            cached = await pipe.execute()
        return {
            principal: readable(principal, value.decode() if isinstance(value, bytes) else value)
            for principal, value in zip(unique, cached, strict=True)
        }
