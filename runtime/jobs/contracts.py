"""What crosses between the web process and the workers through Redis: the jobs.

The web process validates a slash command and enqueues a `StartJob`; a decision that leaves
nothing pending enqueues a `ResumeJob` (from inside a Lua script, so its JSON is built there too:
keep `approvals.py` in step with `ResumeJob`).
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

# Run and approval ids travel in button values: short, opaque, and checked on the way back in.
RUN_ID_PATTERN = r"^r[0-9a-f]{16}$"
APPROVAL_ID_PATTERN = r"^a[0-9a-f]{10}$"


def new_run_id(seed: str | None = None) -> str:
    """A fresh id, or one derived from `seed` so that a repeated request maps to the same run."""
    if seed is None:
        return "r" + secrets.token_hex(8)
    return "r" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def start_job_id(run_id: str) -> str:
    """The id of a run's start job (its marker says it was enqueued: `Shard.job_marker`)."""
    return f"start:{run_id}"


def new_approval_id() -> str:
    return "a" + secrets.token_hex(5)


class Conversation(BaseModel):
    """Where a run talks to people; the runtime passes it through, reading only `direct`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str
    requester: str
    requester_external: bool = False
    """The requester is a guest or of another organisation (EXTERNAL_REQUESTERS=allow): no grant,
    Approve always or automatic approval covers their calls."""
    thread: str | None = None
    """Id of the run's root message, once posted."""
    reply_url: str | None = None
    """Where to reach the requester if the channel refuses our messages."""
    direct: bool = False
    """Started in a direct message with the app (its Messages tab, `/agent` there): the
    conversation is the requester's alone, so each card goes to the approvers' channel (its
    rule's `channel`, else `APPROVAL_CHANNEL`) and is only pointed at here."""
    opened: str | None = None
    """The person's message that started the run (a direct message): the run's thread is that
    message's, and its first words a reply in it."""

    @property
    def unset_fields(self) -> set[str]:
        """Fields written only when set, so that an older process reads every run it knew."""
        unset = {"requester_external"} if not self.requester_external else set()
        unset |= {"direct"} if not self.direct else set()
        return unset | ({"opened"} if self.opened is None else set())


class StartJob(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["start"] = "start"
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    agent: str
    task: str = Field(min_length=1, max_length=4000)
    conversation: Conversation
    requested_at: float
    continues: str | None = Field(default=None, pattern=RUN_ID_PATTERN)
    """A reply in a run's thread: the run it continues (the thread is `conversation.thread`).
    Left out of the JSON while unset (`payload`), so an older worker, which forbids unknown
    fields, reads every job it knew. An older worker would drop a continuing job as malformed
    (acknowledged, one log line, the reply unanswered): it goes to the stream only workers of
    this version read (`version`)."""

    @property
    def job_id(self) -> str:
        return start_job_id(self.run_id)

    @property
    def version(self) -> int:
        """The oldest version of the job contract that reads this job, which picks its stream
        (`Shard.job_streams`): 3 for a run started in a direct message, which workers before
        `direct` and `opened` cannot read; 2 for a reply's start or an outsider's run, which
        workers before `continues` and `requester_external` cannot read; else 1."""
        conversation = self.conversation
        if resume_version(conversation) == 3:
            return 3
        return 2 if self.continues or conversation.requester_external else 1

    def payload(self) -> str:
        """The job as queued: without `continues` when it continues nothing, and without the
        conversation's `requester_external` while false, so an older worker (whose contracts
        forbid unknown fields) reads every job it knew."""
        exclude: dict[str, Any] = {} if self.continues else {"continues": True}
        if unset := self.conversation.unset_fields:
            exclude["conversation"] = unset
        return self.model_dump_json(exclude=exclude or None)


def resume_version(conversation: Conversation) -> int:
    """The oldest version of the job contract whose workers can resume a run held in
    `conversation` (its resume job's stream, `Shard.job_streams`): 3 for a run started in a
    direct message, whose stored record a worker before direct messages cannot read, else 1."""
    return 3 if conversation.direct or conversation.opened is not None else 1


class ResumeJob(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["resume"] = "resume"
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    round: int = Field(ge=1)

    @property
    def job_id(self) -> str:
        return f"resume:{self.run_id}:{self.round}"


Job = Annotated[StartJob | ResumeJob, Field(discriminator="kind")]
JOB = TypeAdapter[StartJob | ResumeJob](Job)
