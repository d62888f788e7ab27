"""One round of a run: the SDK runs the agent until it answers, or until a call needs a person.

Calls the policy decides, or that the run's Approve always permits, do not end the round: the
run goes on with their decisions applied. Tools run inside a journal scope
(`runtime.journal.invoker`), so a retried round reuses what already ran instead of running it
again; a call that may have run but whose result was lost asks a person again
(`runtime.runs.lost_outcomes`). How the round ends is told by `runtime.runs.outcomes`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from agents import Agent, RunConfig, Runner, RunState
from agents.items import TResponseInputItem

from runtime.audit.trail import AuditTrail
from runtime.failures import RunFailed, describe_run_error
from runtime.journal.held import released_calls, reviewed_calls
from runtime.journal.scope import JournalScope, ToolsInFlight
from runtime.mcp.connections import McpServerUnavailable
from runtime.mcp.tools import McpTools
from runtime.metrics import count_model_error
from runtime.process.causes import caused_by
from runtime.record.envelope import RunEnvelope
from runtime.record.leases import Fenced, Lease
from runtime.record.permissions import AlwaysPermission
from runtime.record.run_record import RunRecord
from runtime.record.starts import OutcomeLost
from runtime.record.stop_mark import Stopped
from runtime.record.store import RunStore
from runtime.registry import AgentRegistry, UnknownAgent
from runtime.reporter import Failure, Reporter, RunView
from runtime.runs.held_outputs import held_in, resumable_round
from runtime.runs.lost_outcomes import run_again
from runtime.runs.model_text import listening as listening_to_model
from runtime.runs.observer import RunObserver
from runtime.runs.outcomes import RoundOutcomes
from runtime.runs.planner import CallPlanner
from runtime.runs.state_decisions import apply_decisions, approved_edits, approved_notes
from runtime.stops.listener import StopListener
from runtime.stops.safe_point import run_until_stopped

log = logging.getLogger(__name__)

RunInput = str | list[TResponseInputItem] | RunState[Any, Any]


@dataclass(kw_only=True)
class RunRound:
    registry: AgentRegistry
    store: RunStore
    reporter: Reporter
    audit: AuditTrail
    planner: CallPlanner
    outcomes: RoundOutcomes
    max_turns: int
    run_config: RunConfig | None = None
    mcp: McpTools | None = None
    """The registry's MCP tools and their servers' connections; None when no agent has any."""
    stops: StopListener | None = None
    """Tells a working run at once that it was stopped; None: each run polls for it."""

    async def ready_agent(
        self, envelope: RunEnvelope, lease: Lease, *, keep: bool
    ) -> Agent[Any] | None:
        """The run's root agent, its MCP servers answering; None when the run ended instead
        (an agent the registry lacks, or a server that stays down: the thread is told which).
        `keep`: the run's saved state stays for a retry."""
        try:
            agent = self._agent_named(envelope.root_agent)
        except RunFailed as failure:
            await self.outcomes.endings.fail(envelope, failure, lease, keep=keep)
            return None
        if self.mcp is None:
            return agent
        try:
            await self.mcp.ensure_ready(agent)
        except McpServerUnavailable as error:
            log.warning("run %s: %s", envelope.run_id, error)
            unavailable = RunFailed(Failure.MCP_UNAVAILABLE, error.server)
            await self.outcomes.endings.fail(envelope, unavailable, lease, keep=keep)
            return None
        return agent

    def _agent_named(self, name: str) -> Agent[Any]:
        try:
            return self.registry.get(name)
        except UnknownAgent as error:
            raise RunFailed(Failure.UNKNOWN_AGENT, str(error)) from error

    async def advance(
        self,
        envelope: RunEnvelope,
        record: RunRecord,
        agent: Agent[Any],
        run_input: RunInput,
        lease: Lease,
        *,
        context: dict[str, Any] | None = None,
        permissions: tuple[AlwaysPermission, ...] = (),
    ) -> None:
        """Run until the answer, or until a call needs a person (the policy may decide some,
        and `permissions`, the run's Approve always, may approve some under their rules)."""
        observer = RunObserver(
            run=RunView.of(envelope),
            reporter=self.reporter,
            store=self.store,
            lease=lease,
            message_id=record.status_message,
            steps=record.status_steps,
        )
        conversation = envelope.conversation
        observer.tasks.decided(envelope.calls)  # on a resume, the calls just decided
        # Said beside the stretch, not before it: an approved tool does not wait for Slack.
        announced = asyncio.create_task(
            self.reporter.working(observer.run), name=f"working:{envelope.run_id}"
        )
        listening = self.stops.listening(envelope.run_id) if self.stops else nullcontext(None)
        text = observer.watch_text() if self.reporter.shows_text(observer.run) else None
        speaking = (
            asyncio.create_task(observer.speak(), name=f"speaking:{envelope.run_id}")
            if text is not None
            else None
        )
        try:
            with listening as heard, listening_to_model(text):
                scope = JournalScope(
                    store=self.store,
                    audit=self.audit,
                    lease=lease,
                    requester=conversation.requester,
                    channel=conversation.channel,
                    in_flight=ToolsInFlight(),
                    edits=approved_edits(envelope),
                    notes=approved_notes(envelope),
                    heard=heard,
                    round=envelope.round,
                    run_again=run_again(envelope),
                    reviewed=reviewed_calls(envelope),
                    released=released_calls(envelope),
                    recorded_before=record.journal,
                    journaled=record.turns,
                    run=RunView.of(envelope),
                )
                try:
                    await self._steps(
                        envelope, agent, run_input, observer, scope, context, permissions
                    )
                except OutcomeLost as lost:
                    await self.outcomes.ask_again(lost, envelope, record.state, observer, lease)
        except Stopped as stop:
            await self.outcomes.stopped(envelope, stop, observer, lease)
        except BaseException:
            announced.cancel()
            raise
        finally:
            await observer.quiet(speaking)
            await _settled(announced)

    async def _steps(
        self,
        envelope: RunEnvelope,
        agent: Agent[Any],
        run_input: RunInput,
        observer: RunObserver,
        scope: JournalScope,
        context: dict[str, Any] | None,
        permissions: tuple[AlwaysPermission, ...],
    ) -> None:
        lease = scope.lease
        decided = list(envelope.calls)  # on a resume, the calls just decided
        resumable = None  # where a held output waits, when no person was asked (`held_outputs`)
        while True:
            try:
                result = await run_until_stopped(
                    Runner.run(
                        agent,
                        run_input,
                        context=context,
                        # Frozen into the state at the first run; passing it again is ignored.
                        max_turns=self.max_turns,
                        hooks=observer,
                        run_config=self.run_config,
                    ),
                    scope,
                )
            except (Stopped, Fenced, OutcomeLost) as signal:
                held_in(signal, resumable)
                raise
            except Exception as error:
                for ours in (Fenced, Stopped, OutcomeLost):
                    if (cause := caused_by(error, ours)) is not None:
                        # Not `from error`: the SDK's wrapper was raised from `cause` already.
                        raise held_in(cause, resumable) from None
                down = await self.mcp.unreachable(agent) if self.mcp else None
                if down is not None:
                    # Not the run's fault: retried from the saved state once it is back.
                    log.warning("run %s: MCP server %r went away; retried", envelope.run_id, down)
                    raise
                count_model_error(error)
                failure = describe_run_error(error)
                if failure is None:
                    raise
                log.warning(
                    "run %s: ended by %s: %s", envelope.run_id, type(error).__name__, failure
                )
                await self.outcomes.failed(envelope, failure, observer, lease)
                return
            if not result.interruptions:
                output = str(result.final_output)
                await self.outcomes.answered(
                    envelope, output, observer, lease, decided, scope.journal()
                )
                return
            # Redis's clock, read once: the calls' deadlines and their reminders count from it.
            now = await self.store.server_time()
            planned = await self.planner.plan(
                envelope,
                result,
                now=now,
                permissions=permissions,
                before_deciding=scope.journal_turns,
            )
            calls = planned.calls
            await observer.approved_always(calls)
            if any(call.decision is None for call in calls):
                state = json.dumps(result.to_state().to_json(), separators=(",", ":"))
                await self.outcomes.stop_for_approvals(
                    envelope,
                    state,
                    calls,
                    observer,
                    lease,
                    now,
                    planned=planned,
                    permissions=permissions,
                    turns=scope.known_turns(),
                )
                return
            # Nothing asks a person: go on (each call was audited as it was decided).
            decided += calls
            resumable = resumable_round(result, calls)
            scope.reviewed.update(c.call_id for c in calls if c.review_output)
            run_input = result.to_state()
            apply_decisions(run_input, calls)


async def _settled(task: asyncio.Task[None]) -> None:
    """The stretch's announcement ends with the stretch: awaited after it (cancelled when the
    stretch failed, or when this wait is); its error, if any, is a line in the log."""
    try:
        await asyncio.wait([task])
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not task.cancelled() and (error := task.exception()) is not None:
        log.warning("a stretch's start not told: %s", type(error).__name__)
