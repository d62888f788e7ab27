"""Recording a message the worker just posted, or taking it back.

A worker posts a message first and stores its id after, so that a crash in between
costs a second post, never a message the run does not know about. A delivery that stalled (a
paused process, a partition) past its job's idle timeout has been replaced by then: its store
is fenced off (`runtime.record.store.Fenced`) and the new delivery posts the message again. The
stale one takes its own post back, so the thread shows the run once.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable

from runtime.record.envelope import RunEnvelope
from runtime.record.leases import Fenced, Lease
from runtime.record.store import RunStore
from runtime.reporter import Reporter, RunView
from runtime.waiting.copies import CardCopies

log = logging.getLogger(__name__)


async def record_or_retract(
    reporter: Reporter, run: RunView, message_id: str, record: Awaitable[None]
) -> None:
    """Await `record` (the store of `message_id`); if this delivery was fenced off meanwhile,
    retract the message and let `Fenced` go on stopping the delivery."""
    try:
        await record
    except Fenced:
        if message_id:
            log.warning(
                "run %s: another delivery took over while this one posted a message; "
                "taking it back",
                run.run_id,
            )
            await reporter.retract(run, message_id)
        raise


async def post_cards(
    store: RunStore,
    reporter: Reporter,
    copies: CardCopies | None,
    envelope: RunEnvelope,
    lease: Lease,
) -> None:
    """Ask for every open approval that has no message yet (`copies`: the cards that policy
    rules `notify` elsewhere; None: the thread only)."""
    # A card is a promise that the approval exists: not before the replicas have it
    # (`REDIS_MIN_REPLICAS`), else a failover leaves a card that answers "unknown".
    await store.replicated()
    view = RunView.of(envelope)
    for call in envelope.calls:
        if call.message_ts is None and call.decision is None:
            ts = await reporter.approval_requested(view, call)
            await record_or_retract(
                reporter, view, ts, store.set_message_ts(lease, call.approval_id, ts)
            )
        if call.decision is None and copies is not None:
            await copies.notify(view, call)
