"""A decided round resumed: the run's saved state restored and each decision applied, then the
next round run from there.

What a person decided reaches the SDK here: approve, reject with the reason, an edit's
arguments (its preview told first), and an Approve always, which becomes a permission of the
run bound to its rule. A call that changed after it was approved does not run, and the thread
is told why.
"""

from __future__ import annotations

import logging

from runtime.failures import RunFailed
from runtime.jobs.contracts import ResumeJob
from runtime.record.envelope import UnreadableEnvelope
from runtime.record.leases import Claim, Lease
from runtime.record.permissions import granted
from runtime.runs.edited_previews import preview_edits
from runtime.runs.restoring import apply_round, restore
from runtime.runs.round import RunRound

log = logging.getLogger(__name__)


async def resume(
    run_round: RunRound, job: ResumeJob, lease: Lease, claim: Claim | None = None
) -> None:
    """Resume the run `job` names for its round, claimed with `lease` (by `claim`, whose reply
    carries the run's hash as the claim read it: the run is loaded from that)."""
    endings = run_round.outcomes.endings
    try:
        record = await run_round.store.load(job.run_id, claimed=claim)
    except UnreadableEnvelope as error:
        await endings.unreadable(job.run_id, str(error), lease)
        return
    if record is None:
        return
    envelope = record.envelope
    agent = await run_round.ready_agent(envelope, lease, keep=True)
    if agent is None:
        return
    try:
        state = await restore(agent, record, run_round.mcp)
        applied = apply_round(state, envelope, agent, run_round.mcp)
    except RunFailed as failure:
        await endings.fail(envelope, failure, lease, keep=True)
        return
    log.info("run %s: resuming round %d, %d approved", job.run_id, job.round, len(applied.approved))
    await endings.refused(envelope, applied.refused)
    await preview_edits(
        state, envelope, store=run_round.store, reporter=run_round.reporter, lease=lease
    )
    # Approve always on this round's calls: permissions of the run, bound to their rules.
    permissions = granted(envelope.calls, record.rule_keys, record.permissions)
    await run_round.advance(envelope, record, agent, state, lease, permissions=permissions)
