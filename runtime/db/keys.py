"""Every Redis key Countersign uses, in one place.

All keys share one prefix (`REDIS_KEY_PREFIX`), so a deployment, or a test, owns exactly the
keys under it.

With `REDIS_CLUSTER=true` the keys are split into `REDIS_SHARDS` shards so that every script
touches keys of one hash slot: a run belongs to shard `zlib.crc32(run id) mod S`, and its record,
its tombstone, its job marker and its shard's jobs, dead letters, deadlines, reminders, live set
and audit stream share the hash tag `{<prefix>s<k>}`. A grant lives in the shard of the run whose
decision created it (its id is drawn to hash there, `GrantKeys.new_id`), beside that shard's
index of the channel's grants, so the decision script can create it in the same step. Readers of
the shared structures walk `Keys.shards`. Without a cluster there is one shard and no tag: the
key names are those of every earlier version, so an upgrade finds the runs it stored.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Protocol

from runtime.db.shards import (
    HOME_CHANNELS,
    HOME_GROUPS,
    HOME_WAITING,
    JOB_GROUP,
    LIVE_BY,
    Shard,
    shard_index,
)

__all__ = [
    "HOME_CHANNELS",
    "HOME_GROUPS",
    "HOME_WAITING",
    "JOB_GROUP",
    "LIVE_BY",
    "GrantKeys",
    "HomeKeys",
    "KeySettings",
    "Keys",
    "Shard",
    "SlackKeys",
    "shard_index",
]


class KeySettings(Protocol):
    """What `Keys.of` reads of the settings (`runtime.settings.RuntimeSettings`): named here so
    that the keys need not import the settings, which import the keys' defaults."""

    @property
    def redis_key_prefix(self) -> str: ...

    @property
    def shard_count(self) -> int: ...

    @property
    def redis_cluster(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str
    shard_count: int = 1
    """`REDIS_SHARDS` with `REDIS_CLUSTER=true`; 1 otherwise."""
    cluster: bool = False
    """Tag each shard's keys (`{<prefix>s<k>}`) so Redis Cluster puts them in one slot."""

    def __post_init__(self) -> None:
        if self.shard_count < 1 or (self.shard_count > 1 and not self.cluster):
            raise ValueError("more than one shard needs cluster (tagged) keys")

    @classmethod
    def of(cls, settings: KeySettings) -> Keys:
        return cls(settings.redis_key_prefix, settings.shard_count, settings.redis_cluster)

    @property
    def shards(self) -> tuple[Shard, ...]:
        """Every shard, for whoever reads a shared structure (jobs, deadlines, audit...)."""
        return tuple(self.shard(k) for k in range(self.shard_count))

    def shard(self, index: int) -> Shard:
        if not self.cluster:
            return Shard(self.prefix)
        return Shard(f"{{{self.prefix}s{index}}}:", index)

    def shard_of(self, name: str) -> Shard:
        """The shard of a run id, a grant id, or a channel id (`grant_shards`)."""
        return self.shard(shard_index(name, self.shard_count))

    @property
    def only(self) -> Shard:
        """The one shard, where code has no run to pick one by; an error with several, so that
        nothing reads one shard of a cluster believing it has seen everything."""
        if self.shard_count != 1:
            raise ValueError("this key is per shard with REDIS_SHARDS > 1: walk Keys.shards")
        return self.shard(0)

    @property
    def grants(self) -> GrantKeys:
        """The grants' keys (Approve for a while)."""
        return GrantKeys(self)

    @property
    def slack(self) -> SlackKeys:
        """What the web processes cache of Slack: people, groups, channels' members."""
        return SlackKeys(self.prefix, self.cluster)

    @property
    def home(self) -> HomeKeys:
        """The app's Home tab: who opened it, and the pace of its publishes."""
        return HomeKeys(self.prefix, self.cluster)

    def once(self, key: str, token: str) -> str:
        """The reply of one script call on `key` (`runtime.record.once`), in `key`'s slot."""
        if not self.cluster:
            return f"{self.prefix}once:{token}"
        return f"{key[: key.index('}') + 1]}:once:{token}"

    def run(self, run_id: str) -> str:
        return self.shard_of(run_id).run(run_id)

    def tombstone(self, run_id: str) -> str:
        return self.shard_of(run_id).tombstone(run_id)

    def conversation(self, conversation_id: str) -> str:
        """In the shard of the conversation's own id (a thread's, not a run's: each turn of it
        is a run of its own)."""
        return self.shard_of(conversation_id).conversation(conversation_id)

    def thread(self, conversation_id: str) -> str:
        return self.shard_of(conversation_id).thread(conversation_id)

    def reminder_lines(self, run_id: str) -> str:
        return self.shard_of(run_id).reminder_lines(run_id)

    def card_draws(self, run_id: str) -> str:
        return self.shard_of(run_id).card_draws(run_id)

    # Shared structures of the one shard (see `only`).
    @property
    def jobs(self) -> str:
        return self.only.jobs

    @property
    def dead_jobs(self) -> str:
        return self.only.dead_jobs

    def job_marker(self, job_id: str) -> str:
        return self.only.job_marker(job_id)

    @property
    def deadlines(self) -> str:
        return self.only.deadlines

    @property
    def live_runs(self) -> str:
        return self.only.live_runs

    @property
    def reminders(self) -> str:
        return self.only.reminders

    @property
    def audit(self) -> str:
        return self.only.audit

    @property
    def due_wake(self) -> str:
        return self.only.due_wake

    @property
    def replication_probe(self) -> str:
        return self.only.replication_probe

    @staticmethod
    def parked(due_set: str) -> str:
        """Sorted set of a due set's members whose handler kept raising, set aside for a person:
        score = when parked. `ZADD` one back into its due set to try it again."""
        return f"{due_set}:parked"

    @staticmethod
    def due_tries(due_set: str) -> str:
        """Hash: member of a due set -> how often its handler raised (until handled or parked)."""
        return f"{due_set}:tries"

    def notice(self, about: str) -> str:
        """Set while a notice about `about` was said lately (`ThreadHistory.first_notice`)."""
        return f"{self.prefix}notice:{about}"

    @property
    def console(self) -> str:
        """The local console's channel (its stand-in Slack's messages), JSON; only with
        `CONSOLE=true`, so a restarted demo still shows the cards of runs that wait."""
        return f"{self.prefix}console"

    @property
    def live_workers(self) -> str:
        """Sorted set of workers: member consumer name, score when it last said it was alive
        (epoch s, its own clock). Read to know when to look for a dead one's jobs
        (`runtime.jobs.live_workers`)."""
        return f"{self.prefix}workers:live"

    @property
    def mcp_tools(self) -> str:
        """Hash: agent name -> the MCP tools the worker last listed for it (for `/agent help`)."""
        return f"{self.prefix}mcp:tools"


@dataclass(frozen=True, slots=True)
class GrantKeys:
    """A grant lives in the shard of the run whose decision created it (its id is drawn to
    hash there, `new_id`), beside that shard's index of the channel's grants."""

    keys: Keys

    def new_id(self, run_id: str) -> str:
        """A fresh grant id in `run_id`'s shard, so the decision script creates the grant in
        the run's slot (about `shard_count` draws)."""
        wanted = shard_index(run_id, self.keys.shard_count)
        while True:
            grant_id = "g" + secrets.token_hex(5)
            if shard_index(grant_id, self.keys.shard_count) == wanted:
                return grant_id

    def grant(self, grant_id: str) -> str:
        return self.keys.shard_of(grant_id).grant(grant_id)

    def lines(self, grant_id: str) -> str:
        return self.keys.shard_of(grant_id).grant_lines(grant_id)

    def shards(self, channel: str) -> str:
        """The shards that hold grants of `channel` (`runtime.grants.store.note_grant_shard`)."""
        return self.keys.shard_of(channel).grant_shards(channel)

    def of_channel(self, channel: str) -> str:
        """The channel's grants, with one shard (`Keys.only`)."""
        return self.keys.only.channel_grants(channel)


@dataclass(frozen=True, slots=True)
class SlackKeys:
    """What the web processes cache of Slack."""

    prefix: str
    cluster: bool = False

    def group_members(self, group_id: str) -> str:
        """Cached members of a Slack user group (short TTL; refreshed on membership events)."""
        return f"{self._group_prefix(group_id)}group:{group_id}"

    def group_generation(self, group_id: str) -> str:
        """Counts the times a user group changed: a lookup that began before the latest change
        must not cache what it found (for a day after the change, `bot.slack.member_cache`)."""
        return f"{self._group_prefix(group_id)}group-generation:{group_id}"

    def channel_members(self, channel_id: str) -> str:
        """Cached members of a Slack channel (short TTL; refreshed on `member_joined_channel`
        and `member_left_channel`), for calls anyone in the channel may decide."""
        return f"{self._group_prefix(channel_id)}channel-members:{channel_id}"

    def channel_generation(self, channel_id: str) -> str:
        """Counts the times a channel's members changed, as `group_generation` a group's."""
        return f"{self._group_prefix(channel_id)}channel-generation:{channel_id}"

    def _group_prefix(self, group_id: str) -> str:
        """A group's (or channel's) two keys change together (one script, one transaction): one
        slot."""
        return f"{{{self.prefix}{group_id}}}:" if self.cluster else self.prefix

    def display_name(self, principal: str) -> str:
        """Cached display name of a Slack user or handle of a user group."""
        return f"{self.prefix}name:{principal}"

    def person(self, user_id: str) -> str:
        """Cached standing of a Slack user: their team, enterprise, guest or not (users.info)."""
        return f"{self.prefix}person:{user_id}"


@dataclass(frozen=True, slots=True)
class HomeKeys:
    """The app's Home tab (`bot.home`); its index of open calls is per shard (`Shard`)."""

    prefix: str
    cluster: bool = False

    @property
    def viewers(self) -> str:
        """Sorted set of people who opened the app's Home tab: member user id, score when last
        (epoch s). Their tab is republished when something changes for them."""
        return f"{self.prefix}home:viewers"

    def published(self, user_id: str) -> str:
        """Exists for a short while after a person's Home tab was published (the debounce)."""
        return f"{self.prefix}home:published:{user_id}"

    @property
    def publish_rate(self) -> str:
        """When the web processes' bucket of `views.publish` tokens is next due, epoch ms
        (`bot.home.pace`)."""
        return f"{self._rate_prefix}home:publish-rate"

    @property
    def publish_pause(self) -> str:
        """Exists while Slack's Retry-After (a 429 to `views.publish`) lasts."""
        return f"{self._rate_prefix}home:publish-pause"

    @property
    def _rate_prefix(self) -> str:
        """The rate's two keys are read by one script: one slot."""
        return f"{{{self.prefix}home}}:" if self.cluster else self.prefix

    def change(self, stream: str, entry_id: str) -> str:
        """Set by the web process that republishes the tabs an audit entry concerns, so that the
        others leave them (it lapses after `bot.home.watch.CLAIM_SECONDS`)."""
        return f"{self.prefix}home:change:{stream}:{entry_id}"
