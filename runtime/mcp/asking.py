"""An MCP server asks during a call: a person answers, and the call goes on with the answer.

An MCP tool runs only once approved (or once the policy let it run), through the journal. While
it runs, its server may send `elicitation/create` (`runtime.mcp.sessions` gives every session
our callback): a form (a flat JSON schema) or a link. Then, in the worker, while the call is in
flight:

1. the question is matched to the call: the one call of that server in flight in this worker
   (`McpQuestions.tracked` wraps each MCP tool's invoker). MCP does not say which request a
   question belongs to on a stdio session, so with none or several in flight it is answered
   `cancel` and logged, never put to the wrong person;
2. it is stored with its `elicited` audit entry (`runtime.mcp.questions`), and shown in the
   run's thread and, as a copy, to the requester (`QuestionNotices`, Slack's in `bot/`);
3. the worker waits for the answer script's push, with a deadline
   (`ELICITATION_TIMEOUT_SECONDS`): nobody answering by then answers `cancel`, and the thread
   says so;
4. the answer goes back to the server: `accept` with the values, `decline` or `cancel`.

Who answers: the run's requester, unless the server's rule names `elicitation_responders`
(`runtime.policy.responders`); the answer script checks it on every click. A worker that dies
while a person answers loses the call's outcome like any tool that dies mid-call: the call's
start mark has no outcome, and the retry asks a person whether to run it again
(`runtime.runs.lost_outcomes`); the question's waiter key lapses, so a late click is told.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from agents.tool_context import ToolContext
from mcp import types
from mcp.client.session import ClientRequestContext, ElicitationFnT
from redis.exceptions import RedisError

from runtime.journal.scope import JournalScope, current_scope
from runtime.mcp.questions import (
    POP_SECONDS,
    PostedMessage,
    Question,
    QuestionStore,
    StoredQuestion,
)
from runtime.policy import Policy, responders_for
from runtime.reporter import RunView

log = logging.getLogger(__name__)

ASKING_SECONDS = 30.0
"""What asking takes besides the wait: storing the question, posting it, redrawing it."""
END_SECONDS = 5.0
"""How long a call that ends before its answer (stopped, timed out) takes to say so."""

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


class QuestionNotices(Protocol):
    """How people see a question: `bot.reporting.questions.SlackQuestions`."""

    async def asked(
        self, run: RunView, question: Question, deadline: float
    ) -> tuple[PostedMessage, ...]:
        """Show the question in the run's thread, and a copy to the requester, open until
        `deadline` (epoch s); return the messages posted (none when nothing could be)."""
        ...

    async def settled(self, run: RunView, stored: StoredQuestion) -> None:
        """Show how the question was answered on its messages (and, when nobody answered in
        time, say so in the thread). Best effort; never raises."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class _Call:
    scope: JournalScope
    run: RunView
    call_id: str
    tool: str
    agent: str


class McpQuestions:
    def __init__(
        self,
        store: QuestionStore,
        policy: Policy,
        notices: QuestionNotices | None,
        *,
        wait_seconds: int,
    ) -> None:
        self._store = store
        self._policy = policy
        self._notices = notices
        self._wait_seconds = wait_seconds
        self._calls: dict[str, list[_Call]] = {}
        self._worker = secrets.token_hex(6)

    @property
    def longest_wait(self) -> float:
        """How much longer a call may take while its server waits for an answer."""
        return self._wait_seconds + ASKING_SECONDS

    def tracked(self, server: str, tool: str, inner: Invoker) -> Invoker:
        """`inner` (an MCP tool's invoker), known as in flight on `server` while it runs in a
        run's step (inside the journal, after its start mark)."""

        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            scope = current_scope()
            if scope is None or scope.run is None:
                return await inner(ctx, arguments)
            agent = getattr(ctx.agent, "name", None) or "?"
            call = _Call(
                scope=scope, run=scope.run, call_id=ctx.tool_call_id, tool=tool, agent=agent
            )
            calls = self._calls.setdefault(server, [])
            calls.append(call)
            try:
                return await inner(ctx, arguments)
            finally:
                calls.remove(call)

        return invoke

    def callback(self, server: str) -> ElicitationFnT:
        """The elicitation callback of `server`'s sessions."""

        async def elicit(
            context: ClientRequestContext, params: types.ElicitRequestParams
        ) -> types.ElicitResult | types.ErrorData:
            return await self._ask(server, params)

        return elicit

    async def _ask(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        calls = self._calls.get(server, [])
        if len(calls) != 1 or self._notices is None:
            log.warning(
                "MCP server %r asked a question with %d of its calls in flight here; "
                "answered cancel (a question is put only to the people of its one call)",
                server,
                len(calls),
            )
            return types.ElicitResult(action="cancel")
        call = calls[0]
        question = self._question(server, call, params)
        try:
            stored = await self._put(call, question, self._notices)
        except RedisError as error:
            log.warning(
                "run %s: question of MCP server %r answered cancel: Redis unreachable (%s)",
                call.run.run_id,
                server,
                type(error).__name__,
            )
            return types.ElicitResult(action="cancel")
        if stored is None or stored.state not in ("accept", "decline", "cancel"):
            return types.ElicitResult(action="cancel")
        content = stored.content if stored.state == "accept" and question.mode == "form" else None
        return types.ElicitResult(action=stored.state, content=content)  # type: ignore[arg-type]

    def _question(self, server: str, call: _Call, params: types.ElicitRequestParams) -> Question:
        schema, url = None, None
        if isinstance(params, types.ElicitRequestFormParams):
            schema = dict(params.requested_schema)
        else:
            url = params.url
        return Question(
            question_id=f"{call.run.run_id}.q{secrets.token_hex(6)}",
            run_id=call.run.run_id,
            call_id=call.call_id,
            tool=call.tool,
            agent=call.agent,
            server=server,
            mode="form" if schema is not None else "url",
            message=params.message,
            requested_schema=schema,
            url=url,
            requester=call.scope.requester,
            responders=responders_for(self._policy.rules, call.tool, call.agent, server),
            channel=call.scope.channel,
            thread=call.run.conversation.thread,
        )

    async def _put(
        self, call: _Call, question: Question, notices: QuestionNotices
    ) -> StoredQuestion | None:
        """Store and show the question, wait for its answer, show the answer."""
        store, run_id, question_id = self._store, question.run_id, question.question_id
        await store.keep_waiting(run_id, question_id, self._worker)
        deadline = await store.open(question, wait_seconds=self._wait_seconds)
        log.info("run %s: MCP server %r asks (%s)", run_id, question.server, question.mode)
        await store.shown_in(question, await notices.asked(call.run, question, deadline))
        try:
            stored = await self._answer_of(call, question)
        except asyncio.CancelledError:
            await self._ended(call, question, notices)
            raise
        finally:
            with contextlib.suppress(RedisError):
                await store.stop_waiting(run_id, question_id)
        if stored is not None:
            log.info("run %s: question answered %s", run_id, stored.state)
            await notices.settled(call.run, stored)
        return stored

    async def _answer_of(self, call: _Call, question: Question) -> StoredQuestion | None:
        """Wait for a person's answer until the deadline, or until the run is stopped; then
        answer `cancel` (unless a person answered first: the script takes one answer)."""
        store, run_id, question_id = self._store, question.run_id, question.question_id
        loop = asyncio.get_running_loop()
        end = loop.time() + self._wait_seconds
        stopped = call.scope.heard
        answered = False
        while not answered:
            left = end - loop.time()
            if left <= 0 or (stopped is not None and stopped.is_set()):
                break
            await store.keep_waiting(run_id, question_id, self._worker)
            answered = await store.pop_answer(run_id, question_id, min(POP_SECONDS, left))
        if not answered:
            by = "stopped" if stopped is not None and stopped.is_set() else "timeout"
            await store.answer(run_id, question_id, by=by, action="cancel", person=False)
        return await store.read(run_id, question_id)

    async def _ended(self, call: _Call, question: Question, notices: QuestionNotices) -> None:
        """The call ended before an answer (the run stopped, the job was cut off): the question
        is closed `cancel` by `ended`, and its messages say so. Bounded; never raises."""
        try:
            async with asyncio.timeout(END_SECONDS):
                store, run_id, question_id = self._store, question.run_id, question.question_id
                await store.answer(run_id, question_id, by="ended", action="cancel", person=False)
                stored = await store.read(run_id, question_id)
                if stored is not None:
                    await notices.settled(call.run, stored)
        except Exception:
            log.warning("run %s: ended question not closed", question.run_id, exc_info=True)
