"""Exactly once: every tool call's outcome is recorded the moment the tool returns.

A job can fail after a tool ran (the model answers 5xx, the worker is killed) and is then retried
from the state saved before the approval, which asks for the same calls again. Each function tool
of every agent the registry reaches (`runtime.agent_graph`: hand-offs, agents used as tools) is
wrapped once (shell, local shell, apply_patch and custom tools too, in
`runtime.journal.tool_kinds`): a call that already has a recorded outcome gets that outcome
back instead of running again, and a delivery that lost its run (see fencing in
`runtime.record.layout`) runs no further tool. Tools from MCP servers, which the SDK builds
afresh from each listing, are wrapped the same way as they are listed (`runtime.mcp.tools`).
An agent used as a tool is recorded only once it has really returned (while its inner run waits
for approvals, the SDK keeps that run's state and resumes it), and only by the delivery holding the
run: its output comes from model turns, which the holder takes again.
What remains is a crash *inside* a tool, before it returns: each call is marked started before
its tool runs (`runtime.record.starts`), and a retry that finds the mark without an outcome does
not run it but asks a person (`runtime.runs.lost_outcomes`), unless the tool declared itself
safe to
repeat (`runtime.tools.safe_to_repeat`). Run again, it has the same `idempotency_key(ctx)`.

The run a call belongs to travels in a context variable that the executor sets around each step,
so tools need no arguments of ours and calls outside a Countersign run pass straight through.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from agents.tool_context import ToolContext
from redis.exceptions import RedisError

from runtime.agent_graph import end_inner_run, inner_run_interrupted
from runtime.audit.events import AuditEvent
from runtime.calls.digest import call_digest
from runtime.db.replication import PrimaryChanged
from runtime.decisions.edits import edit_note
from runtime.journal.held import HELD_MARK, HELD_OUTCOME, OutputHeld, held_digest, output_text
from runtime.journal.scope import JournalScope, current_scope
from runtime.judging.arguments import ArgumentSchema
from runtime.metrics import count_tool
from runtime.process.backoff import Backoff
from runtime.record.choices import ArgumentEdit
from runtime.record.leases import Fenced
from runtime.record.reads import parse_stop_mark
from runtime.record.starts import OutcomeLost, may_repeat
from runtime.record.stop_mark import Stopped
from runtime.record.turns import inside_call

log = logging.getLogger(__name__)

OUTCOME_CHARS = 300
RECORD_RETRY_FIRST_DELAY = 0.2
RECORD_RETRY_MAX_DELAY = 2.0
"""The longest pause between two tries to record a tool's output through a Redis outage."""


_ESCAPED: contextvars.ContextVar[list[Exception] | None] = contextvars.ContextVar(
    "countersign_escaped", default=None
)
"""Where a tool run inside another tool's call (an agent tool's inner run) leaves what of ours
it raised: the SDK would make it the outer tool's output (its `failure_error_function`)."""


def carried_out(error: Exception) -> Exception:
    """`error`, to be raised from inside an agent tool's inner run (a model call's fence lost,
    its response refused): the enclosing call raises it too once the SDK has turned it into
    the tool's output (its `failure_error_function`), so the step ends as it would at the top."""
    if (escaped := _ESCAPED.get()) is not None:
        escaped.append(error)
    return error


def idempotency_key(ctx: ToolContext[Any]) -> str:
    """`run_id:call_id`: the same on every attempt of one call, different between calls and
    runs. Hand it to the system the tool changes (a payment provider's Idempotency-Key...)."""
    scope = current_scope()
    run_id = scope.lease.run_id if scope else _context_run_id(ctx)
    return f"{run_id}:{ctx.tool_call_id}"


def _context_run_id(ctx: ToolContext[Any]) -> str:
    context = ctx.context
    run_id = context.get("run_id") if isinstance(context, dict) else None
    return str(run_id) if run_id else "-"


Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]


class JournaledInvoker:
    """Wraps a FunctionTool's invoker (or a custom tool's, or an executor's call:
    `runtime.journal.tool_kinds`); attributes the SDK looks for pass through to it."""

    def __init__(
        self,
        tool_name: str,
        inner: Invoker,
        *,
        mcp_server: str | None = None,
        kind: str | None = None,
        argument_schema: ArgumentSchema | None = None,
        agent_tool: bool = False,
    ) -> None:
        self._tool_name = tool_name
        self._inner = inner
        self._mcp_server = mcp_server
        self._kind = kind
        self._agent_tool = agent_tool
        """`Agent.as_tool`'s: recorded only by a delivery that holds the run. Its output comes
        from model turns the run's holder takes again, and must not replace what a person
        decided inside since (a lost call not run again)."""
        self.argument_schema = argument_schema
        """How the tool receives its arguments (`runtime.judging.arguments`): the digest of
        an `executed` entry covers them as its approval did."""
        """`shell`, `local_shell` or `apply_patch` (`runtime.calls.description`): the call's
        `tool_arguments` are then its description, and its digest covers the kind."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def __call__(self, ctx: ToolContext[Any], arguments: str) -> Any:
        scope = current_scope()
        if scope is None:
            return await self._inner(ctx, arguments)
        try:
            return await self._journaled(scope, ctx, arguments)
        except (OutcomeLost, Fenced, Stopped) as error:
            if (escaped := _ESCAPED.get()) is not None:
                escaped.append(error)
            raise

    async def _journaled(self, scope: JournalScope, ctx: ToolContext[Any], arguments: str) -> Any:
        call_id = ctx.tool_call_id
        original = ctx.tool_arguments or ""
        edit = scope.edits.get(call_id)
        if edit is not None:
            ctx, arguments = edited_call(ctx, edit), edit.arguments
        if (recorded := await self._begin(scope, ctx)) is not None:
            return await self._replay(scope, ctx, json.loads(recorded))
        try:
            # The decision, this delivery's claim and the start mark must survive a failover
            # before the tool runs; else a promoted replica would hand the call to another
            # delivery (NotReplicated: the job is retried, nothing ran).
            await scope.store.replicated()
        except Exception:
            await _not_running(scope, call_id)
            raise
        scope.in_flight.count += 1
        escaped: list[Exception] = []
        token = _ESCAPED.set(escaped)
        try:
            try:
                with inside_call(call_id):
                    output = await self._inner(ctx, arguments)
            except Exception:
                count_tool(self._tool_name, "error")
                await _not_running(scope, call_id)
                raise
            finally:
                _ESCAPED.reset(token)
            if escaped:
                # A call of this agent tool's inner run was lost, fenced or stopped: that ends
                # the step as it would at the top (the start mark stays: nothing returned).
                raise escaped[0]
            if inner_run_interrupted(ctx):
                # An agent tool waiting for approvals inside: not over, and nothing lost either;
                # the SDK resumes its inner run, whose own calls are journaled.
                await _not_running(scope, call_id)
                return output
            count_tool(self._tool_name, "ok")
            output = self._as_told(scope, call_id, original, edit, output)
            # Recorded before anything else can fail: from here on, a retry reuses it.
            entry = self._entry(output, held=call_id in scope.reviewed)
            # The `executed` audit entry goes in the same step: the trail cannot miss it. A held
            # output is not in it: people review it before anyone else reads it.
            told = HELD_OUTCOME if entry.get(HELD_MARK) else output
            executed = self._audit_entry(scope, ctx, AuditEvent.EXECUTED, told)
            await _record(scope, call_id, json.dumps(entry), executed, self._agent_tool)
        finally:
            scope.in_flight.count -= 1
        if entry.get(HELD_MARK):
            raise self._held(scope, ctx, entry["output"])
        return output

    def _entry(self, output: object, *, held: bool) -> dict[str, object]:
        """The journal entry of an output; `held`: for a person first (`runtime.journal.held`)."""
        entry = {"tool": self._tool_name, "output": _storable(output)}
        if self._mcp_server is not None:
            entry["mcp_server"] = self._mcp_server
        if held:
            entry[HELD_MARK] = True
        return entry

    async def _replay(self, scope: JournalScope, ctx: ToolContext[Any], entry: Any) -> Any:
        """The call already ran: its recorded output, which the model reads only once a
        person released it where it is held (`runtime.journal.held`)."""
        if entry.get(HELD_MARK) and ctx.tool_call_id not in scope.released:
            raise self._held(scope, ctx, entry["output"])
        end_inner_run(ctx)  # an agent tool: its inner run is over too
        log.info(
            "run %s: %s already ran; its recorded output is reused",
            scope.lease.run_id,
            self._tool_name,
        )
        await self._audit(scope, ctx, AuditEvent.REPLAYED, entry["output"])
        count_tool(self._tool_name, "replayed")
        return entry["output"]

    def _held(self, scope: JournalScope, ctx: ToolContext[Any], output: object) -> OutputHeld:
        digest = held_digest(self._digest(scope, ctx), output)
        text = output_text(output)
        return OutputHeld(scope.lease.run_id, ctx.tool_call_id, self._tool_name, text, digest)

    def _as_told(
        self,
        scope: JournalScope,
        call_id: str,
        original: str,
        edit: ArgumentEdit | None,
        output: Any,
    ) -> Any:
        """The output as the model reads it: after what a person's edit changed, before the
        approvers' notes. Journaled so: a replay gives the model the same text."""
        if edit is not None:
            output = edit_note(self._tool_name, original, edit) + str(output)
        if (note := scope.notes.get(call_id)) is not None:
            output = f"{output}\n\n{note}"
        return output

    async def _begin(self, scope: JournalScope, ctx: ToolContext[Any]) -> bytes | None:
        """The call's recorded outcome, if it ran; else its start mark is written, with the
        model turns nothing has acted on yet, in the same step as the read (`CallStarts.begin`):
        in the order a call's checks go: recorded (replayed), fenced, stopped, lost.

        A call that started without an outcome may have run, so it runs again only when a
        person says so (or its tool is safe to repeat). An agent tool whose inner run the
        restored state saved waiting resumes that run, not its agent afresh: its calls keep
        their ids, each journaled and marked, so none runs twice."""
        run_id, call_id = scope.lease.run_id, ctx.tool_call_id
        turns, stopping = dict(scope.turns.pending), scope.in_flight.stopping
        held = scope.store.recent.holds_output(run_id, call_id)
        while True:
            status, found = await scope.store.starts.begin(
                run_id,
                scope.lease.fence,
                call_id,
                scope.round,
                run_again=call_id in scope.run_again,
                repeats=may_repeat(self) or inner_run_interrupted(ctx),
                stopping=stopping is not None,
                turns=turns,
                held=held,
            )
            if status != "missing":
                break
            # This worker recorded the call, and the primary has lost it in a failover: it is
            # written back and reused (`runtime.failover.calls`), else looked at again.
            if (found := await scope.store.recent.reuse(run_id, call_id)) is not None:
                return found
            held = False
        if status == "recorded":
            return found
        if status == "stopped" and found is not None:
            raise Stopped(run_id, parse_stop_mark(found))
        if status == "stopping" and stopping is not None:
            raise Stopped(run_id, stopping)
        if status == "lost":
            count_tool(self._tool_name, "lost")
            raise OutcomeLost(run_id, call_id, self._tool_name)
        if status != "marked":
            raise Fenced(run_id)
        scope.turns.journaled(turns)
        scope.store.recent.started(run_id, call_id, scope.round)
        return None

    async def _audit(
        self, scope: JournalScope, ctx: ToolContext[Any], event: AuditEvent, output: object
    ) -> None:
        await scope.audit.record(event, scope.lease.run_id, **self._details(scope, ctx, output))

    def _audit_entry(
        self, scope: JournalScope, ctx: ToolContext[Any], event: AuditEvent, output: object
    ) -> str:
        return scope.audit.entry(event, scope.lease.run_id, **self._details(scope, ctx, output))

    def _details(
        self, scope: JournalScope, ctx: ToolContext[Any], output: object
    ) -> dict[str, str | None]:
        return {
            "call_id": ctx.tool_call_id,
            "tool": self._tool_name,
            "agent": getattr(ctx.agent, "name", None),
            "requester": scope.requester,
            "channel": scope.channel,
            "digest": self._digest(scope, ctx),
            "outcome": _outcome(output),
            **({"mcp_server": self._mcp_server} if self._mcp_server is not None else {}),
        }

    def _digest(self, scope: JournalScope, ctx: ToolContext[Any]) -> str:
        """The digest the call's approval bound: an edit's own (the text a person approved,
        and the tool runs), else the model's arguments as the tool receives them."""
        edit = scope.edits.get(ctx.tool_call_id)
        if edit is not None:
            return edit.digest
        arguments, schema = ctx.tool_arguments or "", self.argument_schema
        if schema is not None and self._kind is None:
            arguments = schema.judged(arguments).text
        return call_digest(self._tool_name, arguments, self._mcp_server, kind=self._kind)


async def _not_running(scope: JournalScope, call_id: str) -> None:
    """The tool did not start, or raised (it returned): the retry that follows runs it again,
    as it always did. Unsaid (Redis away), the retry asks a person instead."""
    scope.store.recent.not_running(scope.lease.run_id, call_id)
    with contextlib.suppress(RedisError):
        await scope.store.starts.not_running(scope.lease.run_id, scope.lease.fence, call_id)


async def _record(scope: JournalScope, call_id: str, entry: str, audit: str, fenced: bool) -> None:
    """The tool has run: its output is held only here, so a Redis outage is waited out for as
    long as the delivery holds its job (`JOB_TIMEOUT_SECONDS` cancels it; then the retry finds
    the start mark without an outcome and asks a person). `fenced`: recorded only while this
    delivery holds the run (else Fenced)."""
    lease = scope.lease if fenced else None
    backoff = Backoff(RECORD_RETRY_FIRST_DELAY, RECORD_RETRY_MAX_DELAY)
    try:
        while True:
            try:
                await scope.store.journal_put(scope.lease.run_id, call_id, entry, audit, lease)
                scope.recorded[call_id] = entry
                return
            except PrimaryChanged:
                # Recorded on the new primary after a failover; what else this attempt wrote
                # may have died with the old one, so the job runs again there (reusing it).
                log.warning(
                    "run %s: output of %s recorded on the new Redis primary; the job runs again",
                    scope.lease.run_id,
                    call_id,
                )
                raise
            except RedisError as error:
                log.warning(
                    "run %s: output of %s not recorded yet (%s); retrying in %g s",
                    scope.lease.run_id,
                    call_id,
                    error,
                    backoff.delay,
                )
            await asyncio.sleep(backoff.failed())
    except asyncio.CancelledError:
        log.warning(
            "run %s: output of %s not recorded: cancelled while Redis was away (the job "
            "timed out, or the worker stopped); a retry asks a person before running it again",
            scope.lease.run_id,
            call_id,
        )
        raise


def edited_call(ctx: ToolContext[Any], edit: ArgumentEdit) -> ToolContext[Any]:
    """The tool's context for running with a person's edited arguments: `tool_arguments` is
    the edited text, and nothing the SDK prepared from the model's arguments carries over."""
    return ToolContext.from_agent_context(
        ctx,
        ctx.tool_call_id,
        tool_call=ctx.tool_call,
        agent=ctx.agent,
        tool_name=ctx.tool_name,
        tool_arguments=edit.arguments,
        tool_namespace=ctx.tool_namespace,
        run_config=ctx.run_config,
    )


def _storable(output: object) -> object:
    """JSON as is, anything else as the text the model would be shown."""
    try:
        json.dumps(output)
    except (TypeError, ValueError):
        return str(output)
    return output


def _outcome(output: object) -> str:
    """The output as the audit trail shows it, shortened: text as it is, anything else as JSON
    (an MCP tool returns content parts, whose `str()` would be a Python repr)."""
    stored = _storable(output)
    text = stored if isinstance(stored, str) else json.dumps(stored, ensure_ascii=False)
    return text[:OUTCOME_CHARS]


def ran_tools(entries: list[bytes]) -> list[str]:
    """The names of the tools recorded in a run's journal."""
    return sorted({str(json.loads(entry).get("tool", "?")) for entry in entries})
