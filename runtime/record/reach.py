"""What a call was promised besides its thread (field `reach:<id>` of the run record): copies to
whom, reminders when, an escalation to whom and when. Planned from the policy when the run stops
for the call (`runtime.waiting.plan`), read back with the call (`runtime.record.reads`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from runtime.record import layout as rr

REACH_VERSION: Final = 1

NudgeKind = Literal["remind", "escalate"]


@dataclass(frozen=True, slots=True, order=True)
class Nudge:
    at: float
    kind: NudgeKind


class CallReach(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    v: Literal[1] = REACH_VERSION
    asked_at: float
    """When the run stopped for the call (Redis's clock)."""
    notify: tuple[str, ...] = ()
    """Users, user groups and channels that get a copy of the card."""
    remind_at: tuple[float, ...] = ()
    escalate_at: float | None = None
    escalate_to: tuple[str, ...] = ()

    def under(self, gate: rr.CallGate | None, expires_at: float) -> CallReach:
        """This reach once an edit moved the call under a stricter rule (`gate.regated`): that
        rule's escalation, counted from when the call was asked, replaces the looser rule's
        (`CallGate.regated_to` says why)."""
        if gate is None or not gate.regated:
            return self
        at = None
        if gate.escalate_after_seconds is not None and gate.escalate_to:
            at = self.asked_at + gate.escalate_after_seconds
        return self.model_copy(
            update={
                "escalate_at": at if at is not None and at < expires_at else None,
                "escalate_to": gate.escalate_to,
            }
        )

    def nudges(self) -> list[Nudge]:
        found = [Nudge(at, "remind") for at in self.remind_at]
        if self.escalate_at is not None and self.escalate_to:
            found.append(Nudge(self.escalate_at, "escalate"))
        return sorted(found)

    def due(self, done_until: float, now: float) -> list[Nudge]:
        """The nudges due by `now` that were not done yet."""
        return [nudge for nudge in self.nudges() if done_until < nudge.at <= now]

    def next_after(self, moment: float) -> float | None:
        return next((nudge.at for nudge in self.nudges() if nudge.at > moment), None)
