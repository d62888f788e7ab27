"""The job queue's Lua scripts (`runtime.jobs.queue`): enqueue, the heartbeat, forgetting idle
consumers. Each is a file of `runtime/jobs/lua/`, headed by its keys and arguments."""

from __future__ import annotations

from runtime.db.keys import JOB_GROUP
from runtime.db.lua import lua_script

ENQUEUE_SCRIPT = lua_script("runtime.jobs", "enqueue", constants={"JOB_GROUP": JOB_GROUP})

STREAM_LOST = (
    "the job stream %s was lost (Redis was emptied, or restarted without its data): made it "
    "again with its consumer group; jobs and runs stored before are gone"
)

HEARTBEAT_SCRIPT = lua_script("runtime.jobs", "heartbeat")

FORGET_IDLE_CONSUMERS_SCRIPT = lua_script("runtime.jobs", "forget_idle_consumers")
