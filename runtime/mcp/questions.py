"""The questions MCP servers ask during a call (`elicitation/create`), as stored in Redis.

One hash per question, in its run's shard (`Shard.question`): the question (`Question`), its
state (`open`, then MCP's `accept`, `decline` or `cancel`), who answered, the values, and the
messages that show it. Two scripts touch it, each once per call however often redis-py resends
it (`runtime.record.once`), each with its audit entry in the same step: `question_open.lua`
(the worker, as the server asks: `elicited`) and `question_answer.lua` (a person's click in the
web process, or the worker when the time is up: `elicitation_answered`). The answer script is
the one place that says who may answer; the web asks it, with `check`, before opening a form.

The worker waits on the question's `answers` list and keeps its `waiter` key alive meanwhile:
a worker that dies lets it lapse within `WAITER_SECONDS`, and a click after that is told the
call ended instead of answering nobody.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runtime.audit.arguments import KeptArguments
from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.db.keys import Keys
from runtime.db.lua import Key, ScriptCall, declare
from runtime.db.shards import Shard
from runtime.record.once import OnceScript, once_body

Action = Literal["accept", "decline", "cancel"]
ACTIONS: tuple[Action, ...] = ("accept", "decline", "cancel")
WAITER_SECONDS = 10
"""How long the waiter key outlives the worker's last sign of life (it renews it every
`POP_SECONDS`)."""
POP_SECONDS = 2
"""The longest blocking pop of the answers list between two renewals of the waiter key."""
KEEP_SECONDS = 86400
"""How long a question's hash stays after its deadline: a late click is told it is over."""
QUESTION_ID_PATTERN = r"^[A-Za-z0-9_.:-]{1,120}$"


class Question(BaseModel):
    """What a server asked, of which call, and who may answer."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    question_id: str = Field(pattern=QUESTION_ID_PATTERN)
    run_id: str
    call_id: str
    tool: str
    agent: str
    server: str
    mode: Literal["form", "url"]
    message: str
    requested_schema: dict[str, Any] | None = None
    """Form mode: the flat JSON schema of the values asked for."""
    url: str | None = None
    """URL mode: where the person goes."""
    requester: str
    responders: tuple[str, ...] = ()
    """Who may answer (users and user groups); empty: the requester."""
    channel: str
    thread: str | None = None


class PostedMessage(BaseModel):
    """A message that shows a question: the thread's, or the copy in the requester's DMs."""

    model_config = ConfigDict(frozen=True)

    channel: str
    ts: str


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredQuestion:
    """A question as it stands."""

    question: Question
    state: str
    """`open`, or the answer's action."""
    by: str
    """Who answered: a user id, `timeout` or `ended`; '' while open."""
    content: dict[str, Any] | None
    deadline: float
    messages: tuple[PostedMessage, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OpenQuestion(ScriptCall):
    question: Key
    audit: Key
    question_json: str
    wait_seconds: int
    keep_seconds: int
    entry: str


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerQuestion(ScriptCall):
    question: Key
    answers: Key
    waiter: Key
    audit: Key
    by: str
    person: str
    groups: str
    action: str
    content: str
    check: str
    entry: str
    keep_seconds: int


OPEN = declare(OpenQuestion, "runtime.mcp", "question_open", frame=once_body)
ANSWER = declare(AnswerQuestion, "runtime.mcp", "question_answer", frame=once_body)


def values_digest(content: dict[str, Any] | None) -> str:
    """The digest of an answer's values (canonical JSON), kept by every audit entry."""
    text = json.dumps(content or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class QuestionStore:
    """The questions' hashes and scripts, for the worker and the web process alike."""

    def __init__(self, redis: aioredis.Redis, keys: Keys, *, kept: KeptArguments) -> None:
        self._redis = redis
        self._keys = keys
        self._kept = kept
        self._open = OnceScript(redis, keys, OPEN)
        self._answer = OnceScript(redis, keys, ANSWER)

    def _shard(self, run_id: str) -> Shard:
        return self._keys.shard_of(run_id)

    async def open(self, question: Question, *, wait_seconds: int) -> float:
        """Store the question (its `elicited` entry with it); its deadline, by Redis's clock."""
        shard = self._shard(question.run_id)
        entry = AuditTrail.entry(
            AuditEvent.ELICITED,
            question.run_id,
            question_id=question.question_id,
            call_id=question.call_id,
            tool=question.tool,
            agent=question.agent,
            mcp_server=question.server,
            mode=question.mode,
            message=question.message[:300],
            requester=question.requester,
            channel=question.channel,
        )
        call = OpenQuestion(
            question=shard.question(question.question_id),
            audit=shard.audit,
            question_json=question.model_dump_json(),
            wait_seconds=wait_seconds,
            keep_seconds=wait_seconds + KEEP_SECONDS,
            entry=entry,
        )
        return float(await self._open(call))

    async def shown_in(self, question: Question, messages: tuple[PostedMessage, ...]) -> None:
        """Remember where the question is shown, for whoever redraws it."""
        text = json.dumps([m.model_dump() for m in messages])
        await self._redis.hset(
            self._shard(question.run_id).question(question.question_id), "messages", text
        )

    async def answer(
        self,
        run_id: str,
        question_id: str,
        *,
        by: str,
        action: Action,
        content: dict[str, Any] | None = None,
        person: bool = True,
        groups: tuple[str, ...] = (),
        check: bool = False,
        channel: str | None = None,
    ) -> list[str]:
        """Run the answer script (see its header for the replies)."""
        shard = self._shard(run_id)
        entry = ""
        if not check:
            entry = AuditTrail.entry(
                AuditEvent.ELICITATION_ANSWERED,
                run_id,
                question_id=question_id,
                action=action,
                by=by,
                user_id=by if person else None,
                channel=channel,
                digest=values_digest(content),
                **self._values(content),
            )
        call = AnswerQuestion(
            question=shard.question(question_id),
            answers=shard.question_answers(question_id),
            waiter=shard.question_waiter(question_id),
            audit=shard.audit,
            by=by,
            person="1" if person else "0",
            groups=json.dumps(list(groups)),
            action=action,
            content=json.dumps(content) if content is not None else "",
            check="1" if check else "0",
            entry=entry,
            keep_seconds=KEEP_SECONDS,
        )
        reply = await self._answer(call)
        return [part.decode() if isinstance(part, bytes) else str(part) for part in reply]

    def _values(self, content: dict[str, Any] | None) -> dict[str, str | int]:
        """The values as an audit entry keeps arguments (`AUDIT_ARGS`), under their own names."""
        if content is None:
            return {}
        kept = self._kept.fields(json.dumps(content, ensure_ascii=False))
        return {key.replace("arguments", "values"): value for key, value in kept.items()}

    async def read(self, run_id: str, question_id: str) -> StoredQuestion | None:
        """The question as it stands; None when it is gone (or unreadable)."""
        raw: Any = await self._redis.hgetall(self._shard(run_id).question(question_id))
        fields = {k.decode(): v.decode() for k, v in raw.items()}
        try:
            question = Question.model_validate_json(fields["question"])
            content = json.loads(fields["content"]) if fields.get("content") else None
            messages = tuple(
                PostedMessage.model_validate(m) for m in json.loads(fields.get("messages", "[]"))
            )
            deadline = float(fields["deadline"])
        except (KeyError, ValueError, ValidationError):
            return None
        return StoredQuestion(
            question=question,
            state=fields.get("state", "open"),
            by=fields.get("by", ""),
            content=content if isinstance(content, dict) else None,
            deadline=deadline,
            messages=messages,
        )

    async def keep_waiting(self, run_id: str, question_id: str, worker: str) -> None:
        """The worker still waits: the waiter key lives `WAITER_SECONDS` more."""
        waiter = self._shard(run_id).question_waiter(question_id)
        await self._redis.set(waiter, worker, ex=WAITER_SECONDS)

    async def stop_waiting(self, run_id: str, question_id: str) -> None:
        await self._redis.delete(self._shard(run_id).question_waiter(question_id))

    async def pop_answer(self, run_id: str, question_id: str, seconds: float) -> bool:
        """Wait up to `seconds` for the answer script's push; True when one came."""
        answers = self._shard(run_id).question_answers(question_id)
        popped = await self._redis.blpop([answers], timeout=max(1, round(seconds)))
        return popped is not None
