"""How the runtime reaches people outside a run's thread, without knowing where they are.

Beside `runtime.reporter.Reporter` (which speaks in the thread): copies of a card in direct
messages and other channels, and the word that a call was escalated. `bot.slack_reach.SlackReach`
implements it with the Slack Web API; a worker without one sends no copies.
"""

from __future__ import annotations

from typing import Protocol

from runtime.envelope import CardCopy, PendingCall
from runtime.reporter import RunView


class Reach(Protocol):
    async def copy_card(
        self, run: RunView, call: PendingCall, targets: tuple[str, ...]
    ) -> tuple[CardCopy, ...]:
        """Post a copy of `call`'s card to each target: a person (a direct message), each member
        of a user group, or a channel. Returns the copies posted; a target that cannot be
        reached is skipped (and logged)."""
        ...

    async def redraw_copies(self, run: RunView, call: PendingCall) -> None:
        """Show `call` as it stands (decided, or the approvals so far) on each of its copies."""
        ...

    async def escalated(self, run: RunView, call: PendingCall, targets: tuple[str, ...]) -> None:
        """Say in the run's thread that `call` was escalated to `targets`, mentioning them, and
        redraw its card and copies so they name everyone who may decide it now."""
        ...
