"""What a round of a run ends in, recorded and told: the answer, a stop for approvals (also
when a call's result was lost and a person decides whether it runs again), a failure, a stop
by a person; and a step a previous delivery left half done, finished.

Each is written with the delivery's lease (`runtime.record.leases`): a delivery that was
overtaken writes nothing, and the one that overtook it reports instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from runtime.audit.trail import AuditTrail
from runtime.conversations import threads
from runtime.failures import RunFailed
from runtime.journal.held import OutputHeld
from runtime.journal.invoker import ran_tools
from runtime.policy import Policy
from runtime.record.envelope import PendingCall, RunEnvelope, UnreadableEnvelope
from runtime.record.leases import Lease
from runtime.record.permissions import AlwaysPermission, permission_fields
from runtime.record.starts import OutcomeLost
from runtime.record.stop_mark import Stopped
from runtime.record.store import RunStore
from runtime.reporter import Failure, Reporter
from runtime.runs.call_audit import requested
from runtime.runs.endings import RunEndings
from runtime.runs.held_outputs import held_entry, held_round
from runtime.runs.lost_outcomes import asked_again, lost_entry
from runtime.runs.observer import RunObserver, not_run_notes
from runtime.runs.planner import Planned
from runtime.runs.posted_messages import post_cards
from runtime.waiting.copies import CardCopies
from runtime.waiting.plan import plan_reach

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class RoundOutcomes:
    store: RunStore
    reporter: Reporter
    audit: AuditTrail
    policy: Policy
    endings: RunEndings
    reminder_at: tuple[float, ...] = ()
    """Fractions of an approval's lifetime after which its approvers are reminded."""
    allow_self_approval: bool = False
    """Written into each call's gate: may the requester approve their own run's calls?"""
    copies: CardCopies | None = None
    """Sends the copies of cards that policy rules `notify`; None: the thread only."""
    history: threads.ThreadHistory | None = None
    """Each thread's turns, for a reply in it to continue from; None: every run starts anew."""

    async def answered(
        self,
        envelope: RunEnvelope,
        output: str,
        observer: RunObserver,
        lease: Lease,
        decided: list[PendingCall],
        journal: list[bytes] | None = None,
    ) -> None:
        """The model answered: the thread's history keeps the turn, the status says what ran
        (and which of the `decided` calls did not), and the answer is posted. `journal`: the
        run's tool outcomes, when the round knows them all (else they are read)."""
        await threads.add_turn(self.history, envelope, output)  # before a reply can come
        await self.store.mark_finishing(lease, output)
        if journal is None:
            journal = await self.store.journal(envelope.run_id)
        ran = ran_tools(journal)
        await observer.flush("done", ran=tuple(ran), not_run=not_run_notes(decided))
        await self.endings.finish(envelope, output, lease)

    async def failed(
        self, envelope: RunEnvelope, failure: RunFailed, observer: RunObserver, lease: Lease
    ) -> None:
        await observer.flush("failed")
        await self.endings.fail(envelope, failure, lease, keep=False)

    async def stopped(
        self, envelope: RunEnvelope, stop: Stopped, observer: RunObserver, lease: Lease
    ) -> None:
        log.info("run %s: stopped by %s", envelope.run_id, stop.mark.user_id)
        await observer.flush("stopped")
        await self.endings.stopped(envelope, lease, stop.mark)

    async def ask_again(
        self,
        lost: OutcomeLost,
        envelope: RunEnvelope,
        state: str | None,
        observer: RunObserver,
        lease: Lease,
    ) -> None:
        """A call that may have run lost its result (`runtime.runs.lost_outcomes`): stop the
        run for its card, from `state` (saved before the round's approvals); end it, saying the
        call may have run, when the call cannot be asked about. An `OutputHeld` stops the run
        for a person to release or withhold the output (`runtime.runs.held_outputs`)."""
        if isinstance(lost, OutputHeld):
            await self._hold(lost, envelope, state, observer, lease)
            return
        log.warning("%s; it is not run again without a person", lost)
        now = await self.store.server_time()
        calls = asked_again(envelope, lost, self.policy, now=now)
        if calls is None or state is None:
            failure = RunFailed(Failure.OUTCOME_LOST, lost.tool)
            await self.failed(envelope, failure, observer, lease)
            return
        entry = lost_entry(self.audit, envelope, lost)
        await self.stop_for_approvals(envelope, state, calls, observer, lease, now, entry)

    async def _hold(
        self,
        held: OutputHeld,
        envelope: RunEnvelope,
        state: str | None,
        observer: RunObserver,
        lease: Lease,
    ) -> None:
        """A call's output is held: the run waits for a person's **Release** or **Withhold**;
        it ends instead (the output never released) when the call cannot be asked about."""
        log.info("%s", held)
        now = await self.store.server_time()
        state = held.resume_state or state
        round_calls = held.resume_calls or envelope.calls
        calls = held_round(round_calls, held, self.policy, now=now)
        if calls is None or state is None:
            await self.failed(envelope, RunFailed(Failure.OUTPUT_HELD, held.tool), observer, lease)
            return
        entry = held_entry(self.audit, envelope, held)
        await self.stop_for_approvals(envelope, state, calls, observer, lease, now, entry)

    async def stop_for_approvals(
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
        turns: frozenset[str] | None = None,
    ) -> None:
        """The run waits for the next round's approvals, with `state_json` to resume from; the
        cards are posted (and their copies sent) once the wait is recorded, the status shown
        just before them recorded with the first card, and shown once more when they are all
        posted, each waiting task linking to its card (`RunObserver.cards_posted`). `turns`:
        the model turns the run's hash holds, when known (`JournalScope.known_turns`)."""
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
            turns=turns,
        )
        status = await observer.waiting([c for c in calls if c.decision is None], asked=len(calls))
        await post_cards(
            self.store,
            self.reporter,
            self.copies,
            waiting,
            lease,
            status,
            notify=reach.notify,
            shown=observer.cards_posted,
        )

    async def half_done(self, lease: Lease) -> None:
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
