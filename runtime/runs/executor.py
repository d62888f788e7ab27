"""Runs the steps of a run: start it, stop it for approvals, resume it, finish it.

Every job may be delivered more than once (a worker can die at any line), so each step first
claims the run (`RunStore.claim`: a fence per delivery) and does only what is still missing.
Tools run inside a journal scope (`runtime.journal.invoker`), so a retried step reuses what already
ran instead of running it again.
"""

from __future__ import annotations

import json
import logging
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

from agents import Agent, RunConfig, Runner, RunState
from agents.items import TResponseInputItem

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.conversations import threads
from runtime.failures import RunFailed, describe_run_error
from runtime.grants.check import GrantCheck, GrantNotices
from runtime.jobs.contracts import ResumeJob, StartJob
from runtime.jobs.queue import Overtaken
from runtime.journal.invoker import JournalScope, ToolsInFlight, ran_tools
from runtime.mcp.connections import McpServerUnavailable
from runtime.mcp.tools import McpTools
from runtime.metrics import count_model_error
from runtime.policy import Policy
from runtime.process.causes import caused_by
from runtime.record.envelope import PendingCall, RunEnvelope, UnreadableEnvelope
from runtime.record.leases import Fenced, Lease
from runtime.record.permissions import AlwaysPermission, granted, permission_fields
from runtime.record.starts import OutcomeLost
from runtime.record.stop_mark import Stopped
from runtime.record.store import RunRecord, RunStore
from runtime.registry import AgentRegistry, UnknownAgent
from runtime.reporter import ConversationUnavailable, Failure, Reporter, RunView
from runtime.runs.edited_previews import preview_edits
from runtime.runs.endings import RunEndings
from runtime.runs.lost_outcomes import ask_again, run_again
from runtime.runs.observer import RunObserver, not_run_notes
from runtime.runs.planner import CallPlanner, Planned, requested
from runtime.runs.posted_messages import post_cards, record_or_retract
from runtime.runs.restoring import apply_round, restore
from runtime.runs.state_decisions import apply_decisions, approved_edits
from runtime.stops.listener import StopListener
from runtime.stops.safe_point import run_until_stopped
from runtime.waiting.copies import CardCopies
from runtime.waiting.plan import plan_reach

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class RunExecutor:
    registry: AgentRegistry
    store: RunStore
    reporter: Reporter
    audit: AuditTrail
    policy: Policy
    max_turns: int
    reminder_at: tuple[float, ...] = ()
    """Fractions of an approval's lifetime after which its approvers are reminded."""
    allow_self_approval: bool = False
    """Written into each call's gate: may the requester approve their own run's calls?"""
    run_config: RunConfig | None = None
    grants: GrantCheck | None = None
    """Grants that approve calls without a card (`runtime.grants.check`); None: none do."""
    grant_notices: GrantNotices | None = None
    copies: CardCopies | None = None
    """Sends the copies of cards that policy rules `notify`; None: the thread only."""
    mcp: McpTools | None = None
    """The registry's MCP tools and their servers' connections; None when no agent has any."""
    stops: StopListener | None = None
    """Tells a working run at once that it was stopped; None: each run polls for it."""
    history: threads.ThreadHistory | None = None
    """Each thread's turns, for a reply in it to continue from; None: every run starts anew."""

    def __post_init__(self) -> None:
        self.endings = RunEndings(store=self.store, reporter=self.reporter, audit=self.audit)
        self.planner = CallPlanner(
            policy=self.policy,
            store=self.store,
            audit=self.audit,
            mcp=self.mcp,
            grants=self.grants,
            notices=self.grant_notices,
        )

    async def start(self, job: StartJob) -> None:
        record = await self.store.create(
            RunEnvelope(
                run_id=job.run_id,
                root_agent=job.agent,
                task=job.task,
                conversation=job.conversation,
                created_at=job.requested_at,
            )
        )
        if record is None:
            log.info("run %s: already ended; its start job is not run again", job.run_id)
            return
        claim = await self.store.claim(job.run_id, kind="start", round_=0)
        if claim.lease is None:
            log.info("run %s: start not needed (%s)", job.run_id, claim.status)
            return
        try:
            if claim.status != "claimed":
                await self._continue(claim.lease)
                return
            await self._start(job, record, claim.lease)
        except Fenced as error:
            log.warning("%s; this delivery stops", error)
            raise Overtaken(str(error)) from error

    async def _start(self, job: StartJob, record: RunRecord, lease: Lease) -> None:
        envelope = record.envelope
        started = threads.started_details(job)
        if envelope.conversation.thread is None:
            try:
                thread = await self.reporter.run_started(RunView.of(envelope))
            except ConversationUnavailable as error:
                log.warning("run %s: conversation unavailable (%s)", job.run_id, error)
                await self.endings.unreachable(job.run_id, lease)
                return
            conversation = envelope.conversation.model_copy(update={"thread": thread})
            envelope = envelope.model_copy(update={"conversation": conversation})
            entry = self.audit.entry(
                AuditEvent.STARTED, job.run_id, **started, channel=conversation.channel
            )
            recorded = self.store.update_envelope(envelope, lease, audit=entry)
            await record_or_retract(self.reporter, RunView.of(envelope), thread, recorded)
            if self.history is not None:
                await self.history.remember(conversation.channel, thread, job.run_id, job.agent)
        elif job.continues:
            channel = envelope.conversation.channel
            await self.audit.record(AuditEvent.STARTED, job.run_id, **started, channel=channel)
        # As loaded before the claim, which changed only the fence; with the envelope as written.
        record = replace(record, envelope=envelope, state=None)
        try:
            agent = self._agent(envelope.root_agent)
        except RunFailed as failure:
            await self.endings.fail(envelope, failure, lease, keep=False)
            return
        if not await self._servers_ready(envelope, agent, lease, keep=False):
            return
        context = {"run_id": job.run_id, "requester": job.conversation.requester}
        run_input = await threads.opening_input(self.history, job, envelope.conversation)
        await self._advance(envelope, record, agent, run_input, lease, context=context)

    async def resume(self, job: ResumeJob) -> None:
        claim = await self.store.claim(job.run_id, kind="resume", round_=job.round)
        if claim.lease is None:
            log.info(
                "run %s: resume of round %d not needed (%s)", job.run_id, job.round, claim.status
            )
            return
        lease = claim.lease
        try:
            if claim.status not in ("claimed", "taken_over"):
                await self._continue(lease)
                return
            await self._resume(job, lease)
        except Fenced as error:
            log.warning("%s; this delivery stops", error)
            raise Overtaken(str(error)) from error

    async def _resume(self, job: ResumeJob, lease: Lease) -> None:
        try:
            record = await self.store.load(job.run_id)
        except UnreadableEnvelope as error:
            await self.endings.unreadable(job.run_id, str(error), lease)
            return
        if record is None:
            return
        envelope = record.envelope
        try:
            agent = self._agent(envelope.root_agent)
        except RunFailed as failure:
            await self.endings.fail(envelope, failure, lease, keep=True)
            return
        if not await self._servers_ready(envelope, agent, lease, keep=True):
            return
        try:
            state = await restore(agent, record, self.mcp)
            applied = apply_round(state, envelope, self.registry.get(envelope.root_agent), self.mcp)
        except RunFailed as failure:
            await self.endings.fail(envelope, failure, lease, keep=True)
            return
        log.info(
            "run %s: resuming round %d, %d approved", job.run_id, job.round, len(applied.approved)
        )
        await self.endings.refused(envelope, applied.refused)
        await preview_edits(state, envelope, store=self.store, reporter=self.reporter, lease=lease)
        # Approve always on this round's calls: permissions of the run, bound to their rules.
        permissions = granted(envelope.calls, record.rule_keys, record.permissions)
        await self._advance(envelope, record, agent, state, lease, permissions=permissions)

    async def on_dead_job(self, job: StartJob | ResumeJob, reason: str) -> None:
        await self.endings.dead_job(job, reason)

    def _agent(self, name: str) -> Agent[Any]:
        try:
            return self.registry.get(name)
        except UnknownAgent as error:
            raise RunFailed(Failure.UNKNOWN_AGENT, str(error)) from error

    async def _servers_ready(
        self, envelope: RunEnvelope, agent: Agent[Any], lease: Lease, *, keep: bool
    ) -> bool:
        """The run's MCP servers answer; if one stays down (the worker retries meanwhile), the
        thread is told which, and the run ends without running anything more."""
        if self.mcp is None:
            return True
        try:
            await self.mcp.ensure_ready(agent)
        except McpServerUnavailable as error:
            log.warning("run %s: %s", envelope.run_id, error)
            failure = RunFailed(Failure.MCP_UNAVAILABLE, error.server)
            await self.endings.fail(envelope, failure, lease, keep=keep)
            return False
        return True

    async def _advance(
        self,
        envelope: RunEnvelope,
        record: RunRecord,
        agent: Agent[Any],
        run_input: str | list[TResponseInputItem] | RunState[Any, Any],
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
        listening = self.stops.listening(envelope.run_id) if self.stops else nullcontext(None)
        try:
            with listening as heard:
                scope = JournalScope(
                    store=self.store,
                    audit=self.audit,
                    lease=lease,
                    requester=conversation.requester,
                    channel=conversation.channel,
                    in_flight=ToolsInFlight(),
                    edits=approved_edits(envelope),
                    heard=heard,
                    round=envelope.round,
                    run_again=run_again(envelope),
                )
                try:
                    await self._steps(
                        envelope, agent, run_input, observer, scope, context, permissions
                    )
                except OutcomeLost as lost:
                    await ask_again(self, lost, envelope, record.state, observer, lease)
        except Stopped as stop:
            log.info("run %s: stopped by %s", envelope.run_id, stop.mark.user_id)
            await observer.flush("stopped")
            await self.endings.stopped(envelope, lease, stop.mark)

    async def _steps(
        self,
        envelope: RunEnvelope,
        agent: Agent[Any],
        run_input: str | list[TResponseInputItem] | RunState[Any, Any],
        observer: RunObserver,
        scope: JournalScope,
        context: dict[str, Any] | None,
        permissions: tuple[AlwaysPermission, ...],
    ) -> None:
        lease = scope.lease
        decided = list(envelope.calls)  # on a resume, the calls just decided
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
            except (Stopped, Fenced, OutcomeLost):
                raise
            except Exception as error:
                for ours in (Fenced, Stopped, OutcomeLost):
                    if (cause := caused_by(error, ours)) is not None:
                        raise cause from error
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
                await observer.flush("failed")
                await self.endings.fail(envelope, failure, lease, keep=False)
                return
            if not result.interruptions:
                output = str(result.final_output)
                await threads.add_turn(self.history, envelope, output)  # before a reply can come
                await self.store.mark_finishing(lease, output)
                ran = ran_tools(await self.store.journal(envelope.run_id))
                await observer.flush("done", ran=tuple(ran), not_run=not_run_notes(decided))
                await self.endings.finish(envelope, output, lease)
                return
            # Redis's clock, read once: the calls' deadlines and their reminders count from it.
            now = await self.store.server_time()
            planned = await self.planner.plan(envelope, result, now=now, permissions=permissions)
            calls = planned.calls
            await observer.approved_always(calls)
            if any(call.decision is None for call in calls):
                state = json.dumps(result.to_state().to_json(), separators=(",", ":"))
                await self._stop_for_approvals(
                    envelope,
                    state,
                    calls,
                    observer,
                    lease,
                    now,
                    planned=planned,
                    permissions=permissions,
                )
                return
            # Nothing asks a person: go on (each call was audited as it was decided).
            decided += calls
            run_input = result.to_state()
            apply_decisions(run_input, calls)

    async def _stop_for_approvals(
        self,
        envelope: RunEnvelope,
        state_json: str,
        calls: tuple[PendingCall, ...],
        observer: RunObserver,
        lease: Lease,
        now: float,
        *audit: str,
        planned: Planned | None = None,
        permissions: tuple[AlwaysPermission, ...] = (),
    ) -> None:
        waiting = envelope.model_copy(update={"round": envelope.round + 1, "calls": calls})
        rules = planned.rules if planned is not None else None
        reach = plan_reach(calls, self.policy, now=now, reminder_at=self.reminder_at, rules=rules)
        keys = planned.keys if planned is not None else {}
        fields = {**reach.fields, **permission_fields(calls, keys, permissions)}
        await self.store.wait_for_approvals(
            waiting,
            state_json,
            lease=lease,
            previous=envelope,
            reminders=reach.first_due,
            self_ok=self.allow_self_approval,
            fields=fields,
            audit=(*audit, *requested(self.audit, waiting, calls)),
        )
        await observer.waiting([c for c in calls if c.decision is None], asked=len(calls))
        await post_cards(self.store, self.reporter, self.copies, waiting, lease)

    async def _continue(self, lease: Lease) -> None:
        """Finish whatever step a previous delivery of this run's job left half done."""
        try:
            record = await self.store.load(lease.run_id, with_state=False)
        except UnreadableEnvelope as error:
            log.warning("%s; left for its resume to report", error)
            return
        if record is None:
            return
        if record.status == "waiting":
            await post_cards(self.store, self.reporter, self.copies, record.envelope, lease)
        elif record.status == "finishing" and record.final_output is not None:
            await self.endings.finish(record.envelope, record.final_output, lease)
