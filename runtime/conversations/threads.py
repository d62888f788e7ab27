"""Which run a thread belongs to, and the turns a reply in it continues from.

A run's thread is remembered (`Keys.thread`) with its last run and that run's agent: the worker
writes it when it posts a run's root message and again with each turn it adds, the web when it
enqueues a reply's run, so a second reply sees the newest run even before a worker took it. Both
expire with the history (`CONVERSATION_TTL_SECONDS` after the last turn).

A reply takes the thread's turn in one step (`follow`, a script on the thread's key): the web
reads the last run, finds it no longer busy, and the script makes the reply's run the last one
only if that run still is. Of two replies racing, one takes the turn and starts a run; the
other finds a run that is not its own and is told to wait. A run that took the turn but has no
record yet (its job about to be enqueued, or waiting for a worker) counts as busy too.

Each run that answers adds its turn to the thread's `ThreadSession`: the person's words and the
answer. A reply's run reads them back as the model's input before the reply, so the model sees
the conversation whatever its provider, and none of it depends on a provider's stored responses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, cast

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, ValidationError

from runtime.conversations.session import ThreadSession, conversation_id
from runtime.db.clock import LATEST
from runtime.db.keys import Keys
from runtime.db.lua import Key, Registered, ScriptCall, declare
from runtime.jobs.contracts import Conversation, StartJob, start_job_id
from runtime.record import layout as rr
from runtime.record.envelope import RunEnvelope

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

BUSY = frozenset({"running", "waiting", "ready", "resuming"})
Busy = Literal["working", "waiting"]
"""A run in one of these states is still working or waiting: a reply must wait for its answer.
Not `finishing`: its answer is written (and its turn is in the history), only its posting and
closing are left, and a person may read the answer and reply before the record is closed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Follow(ScriptCall):
    """`runtime/conversations/lua/follow.lua`."""

    thread: Key
    last_run_id: str
    value: str
    run_id: str
    ttl_seconds: int


FOLLOW_SCRIPT = declare(Follow, "runtime.conversations", "follow")
NOTICE_SECONDS = 60
"""A thread is told its run still works at most once this long, however many replies arrive."""
TURN_TAKEN_SECONDS = 60.0
"""How long a reply's run that took the turn counts as on its way without its start job's
marker: one enqueue, with redis-py's retries and the replicas' confirmation, fits well inside."""


class ThreadRun(BaseModel):
    """The last run of a thread."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    run_id: str
    agent: str
    taken_at: float | None = None
    """When a reply's run took the thread's turn (epoch s), before its job was enqueued: until
    a worker makes its record, this says it is on its way. Left out while unset."""


@dataclass(kw_only=True)
class ThreadHistory:
    redis: aioredis.Redis
    keys: Keys
    ttl_seconds: int
    max_items: int

    def __post_init__(self) -> None:
        self._follow = Registered(self.redis, FOLLOW_SCRIPT)

    def session(self, channel: str, thread: str) -> ThreadSession:
        return ThreadSession(
            redis=self.redis,
            keys=self.keys,
            session_id=conversation_id(channel, thread),
            ttl_seconds=self.ttl_seconds,
            max_items=self.max_items,
        )

    async def remember(self, channel: str, thread: str, run_id: str, agent: str) -> None:
        """`run_id` is now the thread's last run."""
        key = self.keys.thread(conversation_id(channel, thread))
        value = ThreadRun(run_id=run_id, agent=agent).model_dump_json(exclude_none=True)
        await self.redis.set(key, value, ex=self.ttl_seconds)

    async def follow(self, channel: str, thread: str, last: str, run_id: str, agent: str) -> bool:
        """`run_id` is now the thread's last run, if `last` still was (the web found it no longer
        busy): False when another reply's run took the turn first."""
        key = self.keys.thread(conversation_id(channel, thread))
        # Redis's clock: another web process, whose clock may differ by minutes, reads it.
        taken_at = await LATEST.read(self.redis)
        value = ThreadRun(run_id=run_id, agent=agent, taken_at=taken_at).model_dump_json()
        taken = await self._follow(
            Follow(
                thread=key,
                last_run_id=last,
                value=value,
                run_id=run_id,
                ttl_seconds=self.ttl_seconds,
            )
        )
        return int(taken) == 1

    async def give_back(self, channel: str, thread: str, run_id: str, last: ThreadRun) -> None:
        """The reply's run `run_id` took the turn but its job could not be enqueued: `last` is
        the thread's last run again, so the person's retry is not told to wait. Kept when the
        job got in after all (its marker is set: only the enqueue's answer was lost)."""
        if await self.redis.exists(self.keys.shard_of(run_id).job_marker(start_job_id(run_id))):
            return
        await self.follow(channel, thread, run_id, last.run_id, last.agent)

    async def first_notice(self, about: str, seconds: int = NOTICE_SECONDS) -> bool:
        """True once per `seconds` for `about` (what a notice says, and where): a flood of
        replies, or Slack's two deliveries of one mention, get one notice, not one each."""
        return bool(await self.redis.set(self.keys.notice(about), "1", nx=True, ex=seconds))

    async def last_run(self, channel: str, thread: str) -> ThreadRun | None:
        """The thread's last run, if the thread is a run's (and not forgotten)."""
        raw = await self.redis.get(self.keys.thread(conversation_id(channel, thread)))
        if raw is None:
            return None
        try:
            return ThreadRun.model_validate_json(raw)
        except ValidationError:
            return None

    async def busy(self, last: ThreadRun) -> Busy | None:
        """Is the thread's last run still working or waiting, or on its way (taken the turn or
        enqueued, no worker has made its record yet)? `waiting` while a call of it waits for
        a person, `working` otherwise, None once it has ended (its record gone and its
        tombstone there, or the record kept as failed). Its keys share a shard; read in this
        order, a run that starts or ends meanwhile is not missed."""
        run_id = last.run_id
        shard = self.keys.shard_of(run_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.hget(shard.run(run_id), rr.STATUS)
            pipe.exists(shard.tombstone(run_id))
            pipe.exists(shard.job_marker(start_job_id(run_id)))
            status, ended, enqueued = await pipe.execute()
        if status is None:
            # Not begun: on its way while its start job's marker lasts (a job dropped or
            # dead-lettered frees the thread when it expires), or, before it has one, for as
            # long as one enqueue may take.
            since = await LATEST.read(self.redis) - (last.taken_at or 0.0)
            on_its_way = not ended and (bool(enqueued) or since < TURN_TAKEN_SECONDS)
            return "working" if on_its_way else None
        text = status.decode() if isinstance(status, bytes) else str(status)
        if text not in BUSY:
            return None
        return "waiting" if text == "waiting" else "working"

    async def input_for(self, conversation: Conversation, task: str) -> list[TResponseInputItem]:
        """The earlier turns of the run's thread, then the reply."""
        earlier: list[TResponseInputItem] = []
        if conversation.thread is not None:
            earlier = await self.session(conversation.channel, conversation.thread).get_items()
        return [*earlier, _said("user", task)]

    async def add_turn(
        self, conversation: Conversation, task: str, answer: str, *, run_id: str, agent: str
    ) -> None:
        """The turn joins the history, and the thread is this run's again for `ttl_seconds`:
        both count from the last turn. Remembered only when the run started, the thread was
        forgotten while its card waited longer than that, and a reply then started nothing."""
        if conversation.thread is None:
            return
        session = self.session(conversation.channel, conversation.thread)
        await session.add_items([_said("user", task), _said("assistant", answer)])
        await self.remember(conversation.channel, conversation.thread, run_id, agent)


def started_details(job: StartJob) -> dict[str, str]:
    """The `started` audit entry's details; a reply's run names the run it `continues`."""
    details = {"agent": job.agent, "task": job.task, "requester": job.conversation.requester}
    if job.continues:
        details["continues"] = job.continues
    return details


async def opening_input(
    history: ThreadHistory | None, job: StartJob, conversation: Conversation
) -> str | list[TResponseInputItem]:
    """The model's first input: the task, after the thread's earlier turns for a reply."""
    if job.continues is None or history is None:
        return job.task
    return await history.input_for(conversation, job.task)


async def add_turn(history: ThreadHistory | None, envelope: RunEnvelope, answer: str) -> None:
    """The run answered: its task and answer join its thread's history."""
    if history is not None:
        await history.add_turn(
            envelope.conversation,
            envelope.task,
            answer,
            run_id=envelope.run_id,
            agent=envelope.root_agent,
        )


def _said(role: str, text: str) -> TResponseInputItem:
    item: dict[str, Any] = {"role": role, "content": text}
    return cast("TResponseInputItem", item)
