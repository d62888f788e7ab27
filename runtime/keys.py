"""Every Redis key Countersign uses, in one place.

All keys share one prefix (`REDIS_KEY_PREFIX`), so a deployment, or a test, owns exactly the
keys under it.
"""

from __future__ import annotations

from dataclasses import dataclass

JOB_GROUP = "workers"


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str

    @property
    def jobs(self) -> str:
        """Stream of pending jobs, read by the `workers` consumer group."""
        return f"{self.prefix}jobs"

    @property
    def dead_jobs(self) -> str:
        """Stream of jobs that failed too often (the dead-letter stream)."""
        return f"{self.prefix}jobs:dead"

    def job_marker(self, job_id: str) -> str:
        """Exists while a job id was enqueued recently: makes enqueue idempotent."""
        return f"{self.prefix}job:{job_id}"

    def run(self, run_id: str) -> str:
        """Hash holding one run's record: envelope, compressed SDK state, decisions."""
        return f"{self.prefix}run:{run_id}"

    def tombstone(self, run_id: str) -> str:
        """Left behind when a run ends, so that no redelivered job can replay it."""
        return f"{self.prefix}done:{run_id}"

    @property
    def deadlines(self) -> str:
        """Sorted set of approval deadlines: member `run_id:approval_id`, score epoch seconds."""
        return f"{self.prefix}deadlines"

    @property
    def live_runs(self) -> str:
        """Sorted set of runs that have not ended: member run id, score when it started (epoch
        s). The create script adds a run; closing or stopping it removes it; a run whose record
        expired meanwhile is dropped by whoever reads it (`runtime.live_runs`)."""
        return f"{self.prefix}live"

    @property
    def reminders(self) -> str:
        """Sorted set of when to remind approvers: member `run_id:approval_id`, score epoch s."""
        return f"{self.prefix}reminders"

    @staticmethod
    def parked(due_set: str) -> str:
        """Sorted set of a due set's members whose handler kept raising, set aside for a person:
        score = when parked. `ZADD` one back into its due set to try it again."""
        return f"{due_set}:parked"

    @staticmethod
    def due_tries(due_set: str) -> str:
        """Hash: member of a due set -> how often its handler raised (until handled or parked)."""
        return f"{due_set}:tries"

    def group_members(self, group_id: str) -> str:
        """Cached members of a Slack user group (short TTL; refreshed on membership events)."""
        return f"{self.prefix}group:{group_id}"

    def group_generation(self, group_id: str) -> str:
        """Counts the times a user group changed: a lookup that began before the latest change
        must not cache what it found (no TTL; one small counter per group that ever changed)."""
        return f"{self.prefix}group-generation:{group_id}"

    def display_name(self, principal: str) -> str:
        """Cached display name of a Slack user or handle of a user group."""
        return f"{self.prefix}name:{principal}"

    @property
    def console(self) -> str:
        """The local console's channel (its stand-in Slack's messages), JSON; only with
        `CONSOLE=true`, so a restarted demo still shows the cards of runs that wait."""
        return f"{self.prefix}console"

    @property
    def home_viewers(self) -> str:
        """Sorted set of people who opened the app's Home tab: member user id, score when last
        (epoch s). Their tab is republished when something changes for them."""
        return f"{self.prefix}home:viewers"

    def home_published(self, user_id: str) -> str:
        """Exists for a short while after a person's Home tab was published (the debounce)."""
        return f"{self.prefix}home:published:{user_id}"

    @property
    def mcp_tools(self) -> str:
        """Hash: agent name -> the MCP tools the worker last listed for it (for `/agent help`)."""
        return f"{self.prefix}mcp:tools"

    @property
    def audit(self) -> str:
        """Stream of what happened to runs, trimmed by age (`AUDIT_RETENTION_DAYS`)."""
        return f"{self.prefix}audit"

    def grant(self, grant_id: str) -> str:
        """Hash of one grant (`runtime.grants`): `grant` (JSON) and `uses`; expires at its end."""
        return f"{self.prefix}grant:{grant_id}"

    def channel_grants(self, channel: str) -> str:
        """Sorted set of a channel's grants: member grant id, score when it ends."""
        return f"{self.prefix}grants:{channel}"
