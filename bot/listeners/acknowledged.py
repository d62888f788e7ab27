"""Each decision acknowledged to a person, remembered for a while in case Redis fails over and
loses it (`runtime.failover.decisions`): in memory, nothing on the click's path but this."""

from __future__ import annotations

from bot.listeners.gate import GateAnswer
from runtime.decisions import Choice
from runtime.failover import AcknowledgedDecisions


def note_acknowledged(
    decisions: AcknowledgedDecisions | None,
    answer: GateAnswer,
    choice: Choice,
    *,
    where: str,
    card_ts: str | None,
) -> None:
    """`answer` took effect and the person is told so: remember it (`where`: the channel the
    person decided in, or `HOME_TAB`; `card_ts`: the message they clicked, if any)."""
    result, view = answer.result, answer.view
    if decisions is None or result is None or view is None or not choice.user_id:
        return
    if result.decision is not None:
        decided_at = result.decision.decided_at
    elif result.status == "counted" and result.approvals:
        decided_at = result.approvals[-1].at  # towards a quorum: this person's, the last
    else:
        return  # an edit moved under a stricter rule: nothing decided yet
    decisions.note(
        run_id=view.run_id,
        approval_id=view.approval_id,
        user_id=choice.user_id,
        outcome=choice.outcome,
        tool=view.call.tool if view.call is not None else "",
        decided_at=decided_at,
        round_=int(view.round) if view.round.isdigit() else 0,
        where=where,
        card_ts=card_ts or (view.call.message_ts if view.call is not None else None),
    )
