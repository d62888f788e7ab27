"""How a run ends: its answer posted, or its failure told, then its record closed; and how a
call that will not run after all (changed after approval) is told.

A failure says which tools had already run (from the tool journal), so nobody mistakes "the
run failed" for "nothing happened".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.failures import RunFailed
from runtime.jobs.contracts import ResumeJob, StartJob
from runtime.journal.invoker import ran_tools
from runtime.metrics import count_run
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.leases import Lease
from runtime.record.stop_mark import StopMark
from runtime.record.store import RunStore
from runtime.reporter import Failure, Reporter, RunView
from runtime.runs.call_audit import audit_fields

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class RunEndings:
    store: RunStore
    reporter: Reporter
    audit: AuditTrail

    async def finish(self, envelope: RunEnvelope, output: str, lease: Lease) -> None:
        await self.reporter.run_finished(RunView.of(envelope), output)
        finished = self.audit.entry(
            AuditEvent.FINISHED,
            envelope.run_id,
            rounds=envelope.round,
            channel=envelope.conversation.channel,
            requester=envelope.conversation.requester,
        )
        await self._close(envelope, lease, "finished", audit=finished)
        count_run("finished")

    async def stopped(self, envelope: RunEnvelope, lease: Lease, mark: StopMark) -> None:
        """A working run reached its next safe point after someone stopped it."""
        await self.reporter.run_stopped(RunView.of(envelope), mark.user_id)
        await self._close(envelope, lease, "stopped")

    async def fail(
        self, envelope: RunEnvelope, failure: RunFailed, lease: Lease | None, *, keep: bool
    ) -> None:
        """Tell the thread the run ended; keep the record (until its TTL) if it may be recovered."""
        ran = ran_tools(await self.store.journal(envelope.run_id))
        await self.reporter.run_failed(RunView.of(envelope), failure.kind, failure.detail, ran)
        await self._close(envelope, lease, "failed", keep=keep)
        count_run(failure.kind.value)
        await self.audit.record(
            AuditEvent.FAILED,
            envelope.run_id,
            failure=failure.kind.value,
            channel=envelope.conversation.channel,
            requester=envelope.conversation.requester,
            ran=", ".join(ran) or None,
        )

    async def unreadable(self, run_id: str, detail: str, lease: Lease | None) -> None:
        log.error("%s", detail)
        await self._tell(run_id, Failure.UNSUPPORTED_ENVELOPE, detail)
        await self.store.close(run_id, lease=lease, outcome="failed", keep=True)
        count_run(Failure.UNSUPPORTED_ENVELOPE.value)
        await self.audit.record(
            AuditEvent.FAILED, run_id, failure=Failure.UNSUPPORTED_ENVELOPE.value
        )

    async def unreachable(self, run_id: str, lease: Lease) -> None:
        """The run's root message cannot be posted: nobody would see the run, so it ends."""
        await self.store.close(run_id, lease=lease, outcome="failed")
        count_run("conversation_unavailable")
        await self.audit.record(AuditEvent.FAILED, run_id, failure="conversation_unavailable")

    async def dead_job(self, job: StartJob | ResumeJob, reason: str) -> None:
        """A job for this run failed too often: tell its thread and stop trying."""
        conversation = await self.store.locate(job.run_id)
        if conversation is None and isinstance(job, StartJob):
            conversation = job.conversation
        if conversation is None:
            log.error("run %s: gave up, and its record is gone; nobody can be told", job.run_id)
            return
        ran = ran_tools(await self.store.journal(job.run_id))
        view = RunView(run_id=job.run_id, agent="?", task="", conversation=conversation)
        await self.reporter.run_failed(view, Failure.GAVE_UP, reason, ran)
        await self.store.close(job.run_id, lease=None, outcome="failed", keep=True)
        count_run(Failure.GAVE_UP.value)
        await self.audit.record(
            AuditEvent.FAILED, job.run_id, failure=Failure.GAVE_UP.value, ran=", ".join(ran) or None
        )

    async def _tell(self, run_id: str, failure: Failure, detail: str) -> None:
        conversation = await self.store.locate(run_id)
        if conversation is not None:
            ran = ran_tools(await self.store.journal(run_id))
            view = RunView(run_id=run_id, agent="?", task="", conversation=conversation)
            await self.reporter.run_failed(view, failure, detail, ran)

    async def _close(
        self,
        envelope: RunEnvelope,
        lease: Lease | None,
        outcome: str,
        *,
        keep: bool = False,
        audit: str = "",
    ) -> None:
        await self.store.close(
            envelope.run_id,
            lease=lease,
            outcome=outcome,
            approval_ids=tuple(c.approval_id for c in envelope.calls),
            keep=keep,
            audit=audit,
        )

    async def refused(self, envelope: RunEnvelope, calls: Sequence[PendingCall]) -> None:
        """Approved calls whose arguments changed after approval: refused, told and audited."""
        for call in calls:
            log.warning("run %s: %s changed after approval; refused", envelope.run_id, call.tool)
            await self.audit.record(
                AuditEvent.REFUSED, envelope.run_id, **audit_fields(envelope, call)
            )
            await self.reporter.call_refused(RunView.of(envelope), call)
