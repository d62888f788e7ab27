"""The job queue's Lua scripts (`runtime.jobs.queue`): enqueue, the heartbeat, forgetting idle
consumers. Each is a file of `runtime/jobs/lua/`, headed by its keys and arguments, and declared
here by the same names (`runtime.db.lua.declare`)."""

from __future__ import annotations

from dataclasses import dataclass

from runtime.db.keys import JOB_GROUP
from runtime.db.lua import Key, MoreArgs, ScriptCall, declare

MARKER_TTL_SECONDS = 3600
"""How long an enqueued job id is remembered, to drop a duplicate of the same request."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Enqueue(ScriptCall):
    stream: Key
    marker: Key
    other: Key
    third: Key
    job: str
    marker_ttl: int = MARKER_TTL_SECONDS


@dataclass(frozen=True, slots=True, kw_only=True)
class Heartbeat(ScriptCall):
    stream: Key
    group: str = JOB_GROUP
    consumer: str
    entries: MoreArgs


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgetIdleConsumers(ScriptCall):
    stream: Key
    group: str = JOB_GROUP
    min_idle_ms: int


ENQUEUE = declare(Enqueue, "runtime.jobs", "enqueue", constants={"JOB_GROUP": JOB_GROUP})

STREAM_LOST = (
    "the job stream %s was lost (Redis was emptied, or restarted without its data): made it "
    "again with its consumer group; jobs and runs stored before are gone"
)

HEARTBEAT = declare(Heartbeat, "runtime.jobs", "heartbeat")

FORGET_IDLE_CONSUMERS = declare(ForgetIdleConsumers, "runtime.jobs", "forget_idle_consumers")
