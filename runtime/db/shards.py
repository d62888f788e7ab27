"""The keys of one shard: a run's record and everything that must share its hash slot.

`runtime.db.keys` explains the sharding; `Keys` walks these.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

JOB_GROUP = "workers"
HOME_WAITING = "home:waiting:"
HOME_GROUPS = "home:groups"
HOME_CHANNELS = "home:channels"
LIVE_BY = "live:by:"
"""The Home tab's index of open calls, per shard: spelled here for Python and, as Lua locals,
for the record's scripts that keep it (`runtime/record/lua/home_index.lua`)."""


def shard_index(name: str, shards: int) -> int:
    """The shard of a run (or grant) id: stable across processes and versions (not `hash()`)."""
    return zlib.crc32(name.encode()) % shards if shards > 1 else 0


@dataclass(frozen=True, slots=True)
class Shard:
    """The keys of one shard; with one shard (no cluster), the plain prefix."""

    prefix: str
    index: int = 0

    @property
    def jobs(self) -> str:
        """Stream of pending jobs, read by the `workers` consumer group."""
        return f"{self.prefix}jobs"

    @property
    def jobs_v2(self) -> str:
        """Stream of jobs that a worker of a version before them cannot read (a reply's start,
        `StartJob.continues`), read by the same group beside `jobs`: an older worker, which
        reads `jobs` only, leaves them for the newer ones during a rolling deploy instead of
        dropping them as malformed (`StartJob.version`)."""
        return f"{self.prefix}jobs:v2"

    @property
    def jobs_v3(self) -> str:
        """Stream of jobs that a worker of a version before direct messages cannot read (a run
        started in a direct message, `Conversation.direct`), beside the other two, as
        `jobs_v2` is beside `jobs`."""
        return f"{self.prefix}jobs:v3"

    @property
    def job_streams(self) -> tuple[str, str, str]:
        """The shard's job streams, by the version a job needs: `jobs` (1), `jobs_v2` (2),
        `jobs_v3` (3). A worker reads those of its version and before."""
        return (self.jobs, self.jobs_v2, self.jobs_v3)

    @property
    def dead_jobs(self) -> str:
        """Stream of jobs that failed too often (the dead-letter stream)."""
        return f"{self.prefix}jobs:dead"

    def job_marker(self, job_id: str) -> str:
        """Exists while a job id was enqueued recently: makes enqueue idempotent."""
        return f"{self.prefix}job:{job_id}"

    @property
    def replication_probe(self) -> str:
        """A Pub/Sub channel nobody listens to: publishing on it moves the replication offset
        that `WAIT` counts from (`runtime.db.replication`). Not a key; nothing is stored."""
        return f"{self.prefix}replication"

    def run(self, run_id: str) -> str:
        """Hash holding one run's record: envelope, compressed SDK state, decisions."""
        return f"{self.prefix}run:{run_id}"

    def conversation(self, conversation_id: str) -> str:
        """List of one thread's conversation items (the SDK's session items, as JSON), oldest
        first: `runtime.conversations.session`."""
        return f"{self.prefix}conversation:{conversation_id}"

    def thread(self, conversation_id: str) -> str:
        """A run's thread: its last run and that run's agent (`runtime.conversations.threads`)."""
        return f"{self.prefix}thread:{conversation_id}"

    def question(self, question_id: str) -> str:
        """Hash of one question an MCP server asked during a call (`runtime.mcp.questions`),
        in its run's shard: what it asks, who may answer, and the answer once given."""
        return f"{self.prefix}question:{question_id}"

    def question_answers(self, question_id: str) -> str:
        """List the answer script pushes the answer to; the waiting worker pops it."""
        return f"{self.prefix}question:{question_id}:answers"

    def question_waiter(self, question_id: str) -> str:
        """Exists while a worker waits for the answer (refreshed by it, expiring soon after it
        dies): an answer nobody waits for any more is refused."""
        return f"{self.prefix}question:{question_id}:waiter"

    def tombstone(self, run_id: str) -> str:
        """Left behind when a run ends, so that no redelivered job can replay it."""
        return f"{self.prefix}done:{run_id}"

    @property
    def deadlines(self) -> str:
        """Sorted set of approval deadlines: member `run_id:approval_id`, score epoch seconds."""
        return f"{self.prefix}deadlines"

    @property
    def due_wake(self) -> str:
        """Stream of wake-ups for the due-set pollers (`runtime.jobs.due_set`): appended to when a
        deadline or reminder is set sooner than a poller's longest sleep, read blocking by every
        poller, so that it fires on time whichever process set it."""
        return f"{self.prefix}due:wake"

    @property
    def stops(self) -> str:
        """Stream of stops of working runs (`runtime.stops.listener`): the stop script appends
        the run id, and each worker's one blocking read tells the run at once, so that no
        working run has to poll for its stop."""
        return f"{self.prefix}stops"

    @property
    def live_runs(self) -> str:
        """Sorted set of runs that have not ended: member run id, score when it started (epoch
        s). The create script adds a run; closing or stopping it removes it; a run whose record
        expired meanwhile is dropped by whoever reads it (`runtime.runs.live`)."""
        return f"{self.prefix}live"

    def live_runs_of(self, requester: str) -> str:
        """Sorted set of one person's runs among `live_runs` (of this shard), kept by the same
        scripts: what their Home tab lists, read without the others' (`runtime.runs.live`)."""
        return f"{self.prefix}{LIVE_BY}{requester}"

    @property
    def reminders(self) -> str:
        """Sorted set of when to remind approvers: member `run_id:approval_id`, score epoch s."""
        return f"{self.prefix}reminders"

    @property
    def audit(self) -> str:
        """Stream of what happened to runs, trimmed by age (`AUDIT_RETENTION_DAYS`)."""
        return f"{self.prefix}audit"

    def home_waiting(self, principal: str) -> str:
        """Sorted set of the open calls of this shard a person, a user group or (calls anyone in
        it may decide) a channel is named for: member `run_id:approval_id`, score when the run
        stopped for it (`runtime.waiting.index`)."""
        return f"{self.prefix}{HOME_WAITING}{principal}"

    @property
    def home_groups(self) -> str:
        """Set of the user groups with a `home_waiting` set in this shard."""
        return f"{self.prefix}{HOME_GROUPS}"

    @property
    def home_channels(self) -> str:
        """Set of the channels with a `home_waiting` set in this shard."""
        return f"{self.prefix}{HOME_CHANNELS}"

    def grant(self, grant_id: str) -> str:
        """Hash of one grant (`runtime.grants.store`): `grant` (JSON) and `uses`; expires at its
        end."""
        return f"{self.prefix}grant:{grant_id}"

    def reminder_lines(self, run_id: str) -> str:
        """(The Slack bot's) Hash of a run's reminder lines in its thread: approval id -> their
        message ts, comma-separated; redrawn once the call is settled."""
        return f"{self.prefix}reminder_lines:{run_id}"

    def card_draws(self, run_id: str) -> str:
        """(The Slack bot's) Hash of a run's decided cards the web has drawn: approval id -> 1,
        so that the worker's later redraw of one lands after it (`bot.reporting.card_draws`)."""
        return f"{self.prefix}card_draws:{run_id}"

    def grant_lines(self, grant_id: str) -> str:
        """Set of where a grant's quiet lines were posted (`channel:ts`), so that a revoke
        redraws each without its **Revoke**; expires with the grant."""
        return f"{self.prefix}grant:{grant_id}:lines"

    def channel_grants(self, channel: str) -> str:
        """Sorted set of a channel's grants (of this shard): member grant id, score when it
        ends."""
        return f"{self.prefix}grants:{channel}"

    def grant_shards(self, channel: str) -> str:
        """(Cluster only, in the channel's own shard) Set of the shards that may hold grants of
        a channel: where `GrantStore.active` looks, instead of asking every shard."""
        return f"{self.prefix}grants:{channel}:shards"
