"""Runs the steps of a run: start it, stop it for approvals, resume it, finish it.

Every job may be delivered more than once (a worker can die at any line), so each step first
claims the run (`RunStore.claim`: a fence per delivery) and does only what is still missing:
a start opens the run's thread and runs its first round; a resume restores the decided round
(`runtime.runs.resume`); a step a previous delivery left half done is finished
(`runtime.runs.outcomes`). A round itself is `runtime.runs.round`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from agents import RunConfig

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.conversations import threads
from runtime.grants.check import GrantCheck, GrantNotices
from runtime.jobs.contracts import ResumeJob, StartJob
from runtime.jobs.queue import Overtaken
from runtime.mcp.tools import McpTools
from runtime.policy import Policy
from runtime.record.envelope import RunEnvelope
from runtime.record.leases import Fenced, Lease
from runtime.record.run_record import RunRecord
from runtime.record.store import RunStore
from runtime.registry import AgentRegistry
from runtime.reporter import ConversationUnavailable, Reporter, RunView
from runtime.runs.endings import RunEndings
from runtime.runs.outcomes import RoundOutcomes
from runtime.runs.planner import CallPlanner
from runtime.runs.posted_messages import record_or_retract
from runtime.runs.resume import resume
from runtime.runs.round import RunRound
from runtime.stops.listener import StopListener
from runtime.waiting.copies import CardCopies

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class RunExecutor:
    round: RunRound

    @classmethod
    def of(
        cls,
        *,
        registry: AgentRegistry,
        store: RunStore,
        reporter: Reporter,
        audit: AuditTrail,
        policy: Policy,
        max_turns: int,
        reminder_at: tuple[float, ...] = (),
        allow_self_approval: bool = False,
        run_config: RunConfig | None = None,
        grants: GrantCheck | None = None,
        grant_notices: GrantNotices | None = None,
        copies: CardCopies | None = None,
        mcp: McpTools | None = None,
        stops: StopListener | None = None,
        history: threads.ThreadHistory | None = None,
    ) -> RunExecutor:
        """The executor of a worker's runs, from its parts (`runtime.worker`); what each part
        does is said where it is kept (`RunRound`, `RoundOutcomes`, `CallPlanner`)."""
        outcomes = RoundOutcomes(
            store=store,
            reporter=reporter,
            audit=audit,
            policy=policy,
            endings=RunEndings(store=store, reporter=reporter, audit=audit),
            reminder_at=reminder_at,
            allow_self_approval=allow_self_approval,
            copies=copies,
            history=history,
        )
        planner = CallPlanner(
            policy=policy, store=store, audit=audit, mcp=mcp, grants=grants, notices=grant_notices
        )
        return cls(
            round=RunRound(
                registry=registry,
                store=store,
                reporter=reporter,
                audit=audit,
                planner=planner,
                outcomes=outcomes,
                max_turns=max_turns,
                run_config=run_config,
                mcp=mcp,
                stops=stops,
            )
        )

    async def start(self, job: StartJob) -> None:
        store = self.round.store
        created = await store.create(
            RunEnvelope(
                run_id=job.run_id,
                root_agent=job.agent,
                task=job.task,
                conversation=job.conversation,
                created_at=job.requested_at,
            )
        )
        if created is None:
            log.info("run %s: already ended; its start job is not run again", job.run_id)
            return
        record, lease = created.record, created.lease
        try:
            if lease is None:
                # An earlier delivery of this job created the run: take it over from there.
                claim = await store.claim(job.run_id, kind="start", round_=0)
                if claim.lease is None:
                    log.info("run %s: start not needed (%s)", job.run_id, claim.status)
                    return
                lease = claim.lease
                if claim.status != "claimed":
                    await self.round.outcomes.half_done(lease)
                    return
            await self._start(job, record, lease)
        except Fenced as error:
            log.warning("%s; this delivery stops", error)
            raise Overtaken(str(error)) from error

    async def _start(self, job: StartJob, record: RunRecord, lease: Lease) -> None:
        run_round, outcomes = self.round, self.round.outcomes
        envelope = record.envelope
        started = threads.started_details(job)
        if envelope.conversation.thread is None:
            try:
                thread = await run_round.reporter.run_started(RunView.of(envelope))
            except ConversationUnavailable as error:
                log.warning("run %s: conversation unavailable (%s)", job.run_id, error)
                await outcomes.endings.unreachable(job.run_id, lease)
                return
            conversation = envelope.conversation.model_copy(update={"thread": thread})
            envelope = envelope.model_copy(update={"conversation": conversation})
            entry = run_round.audit.entry(
                AuditEvent.STARTED, job.run_id, **started, channel=conversation.channel
            )
            recorded = run_round.store.update_envelope(envelope, lease, audit=entry)
            await record_or_retract(run_round.reporter, RunView.of(envelope), thread, recorded)
            if outcomes.history is not None:
                await outcomes.history.remember(conversation.channel, thread, job.run_id, job.agent)
        elif job.continues:
            channel = envelope.conversation.channel
            await run_round.audit.record(AuditEvent.STARTED, job.run_id, **started, channel=channel)
        # As created, or loaded before the claim (which changed only the fence); with the envelope
        # as written.
        record = replace(record, envelope=envelope, state=None)
        agent = await run_round.ready_agent(envelope, lease, keep=False)
        if agent is None:
            return
        context = {"run_id": job.run_id, "requester": job.conversation.requester}
        run_input = await threads.opening_input(outcomes.history, job, envelope.conversation)
        await run_round.advance(envelope, record, agent, run_input, lease, context=context)

    async def resume(self, job: ResumeJob) -> None:
        claim = await self.round.store.claim(job.run_id, kind="resume", round_=job.round)
        if claim.lease is None:
            log.info(
                "run %s: resume of round %d not needed (%s)", job.run_id, job.round, claim.status
            )
            return
        lease = claim.lease
        try:
            if claim.status not in ("claimed", "taken_over"):
                await self.round.outcomes.half_done(lease)
                return
            await resume(self.round, job, lease, claim)
        except Fenced as error:
            log.warning("%s; this delivery stops", error)
            raise Overtaken(str(error)) from error

    async def on_dead_job(self, job: StartJob | ResumeJob, reason: str) -> None:
        await self.round.outcomes.endings.dead_job(job, reason)
