"""Recording a message the worker just posted, or taking it back.

A worker posts a message first and stores its id after, so that a crash in between
costs a second post, never a message the run does not know about. A delivery that stalled (a
paused process, a partition) past its job's idle timeout has been replaced by then: its store
is fenced off (`runtime.record.store.Fenced`) and the new delivery posts the message again. The
stale one takes its own post back, so the thread shows the run once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from runtime.record import layout as rr
from runtime.record.envelope import RunEnvelope
from runtime.record.leases import Fenced, Lease
from runtime.record.run_record import status_fields
from runtime.record.store import RunStore
from runtime.reporter import Reporter, RunView
from runtime.waiting.copies import CardCopies

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ShownStatus:
    """The run's status message as shown, to be kept with the run (`RunStore.set_status`)."""

    message_id: str
    steps: tuple[str, ...]
    posted: str
    """The message's id if this delivery posted it and has not recorded it yet, else ''."""

    def fields(self) -> dict[str, str]:
        return status_fields(self.message_id, list(self.steps))


async def record_or_retract(
    reporter: Reporter, run: RunView, message_id: str | tuple[str, ...], record: Awaitable[None]
) -> None:
    """Await `record` (the store of `message_id`, or of each of several); if this delivery was
    fenced off meanwhile, retract the messages and let `Fenced` go on stopping the delivery."""
    try:
        await record
    except Fenced:
        posted = [m for m in ((message_id,) if isinstance(message_id, str) else message_id) if m]
        if posted:
            log.warning(
                "run %s: another delivery took over while this one posted a message; "
                "taking it back",
                run.run_id,
            )
        for message in posted:
            await reporter.retract(run, message)
        raise


CardsShown = Callable[[Mapping[str, str]], Awaitable[None]]
"""Told the cards just posted: call id -> the card's id."""


async def post_cards(
    store: RunStore,
    reporter: Reporter,
    copies: CardCopies | None,
    envelope: RunEnvelope,
    lease: Lease,
    status: ShownStatus | None = None,
    notify: Mapping[str, tuple[str, ...]] | None = None,
    shown: CardsShown | None = None,
) -> None:
    """Ask for every open approval that has no message yet (`copies`: the cards that policy
    rules `notify` elsewhere; None: the thread only). `status`: the status message shown just
    before, recorded with the first card's id (one write for both). `notify`: where the calls
    just planned send their copies (`ReachPlan.notify`); None: as their records say. `shown`:
    told the cards posted once the last of them is recorded, before the copies still to send
    (the status message left open for them closes then: `RunObserver.cards_posted`)."""
    # A card is a promise that the approval exists: not before the replicas have it
    # (`REDIS_MIN_REPLICAS`), else a failover leaves a card that answers "unknown".
    await store.replicated()
    view = RunView.of(envelope)
    needed = {c.call_id for c in envelope.calls if c.message_ts is None and c.decision is None}
    posted: dict[str, str] = {}
    for call in envelope.calls:
        if call.call_id in needed:
            ts = await reporter.approval_requested(view, call)
            fields = {rr.TS + call.approval_id: ts, **(status.fields() if status else {})}
            sent = (ts, status.posted) if status else (ts,)
            await record_or_retract(reporter, view, sent, store.set_fields(lease, fields))
            status = None
            posted[call.call_id] = ts
            if shown is not None and len(posted) == len(needed):
                await shown(posted)
        if call.decision is None and copies is not None:
            if notify is None or call.approval_id not in notify:
                await copies.notify(view, call)
            elif targets := notify[call.approval_id]:
                await copies.send(view, call, targets)
    if status is not None:
        await record_or_retract(
            reporter, view, status.posted, store.set_fields(lease, status.fields())
        )
    if shown is not None and not needed:
        await shown(posted)
