"""Who may press the buttons on a card, as far as the web process can help: it looks up which of
the call's approver groups the clicker is in, and words the refusals.

The decision itself is enforced by the decision script (`runtime.run_record`) from the call's
gate; a refused click records nothing but one `denied` entry per person and call.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot import messages
from bot.approvers import ApproverDirectory
from runtime.decision_recorder import Status
from runtime.run_record import CallGate


@dataclass(kw_only=True)
class ApprovalGate:
    directory: ApproverDirectory

    async def groups_of(self, user_id: str, gate: CallGate | None) -> tuple[str, ...]:
        """The gate's groups `user_id` belongs to (one is enough); raises DirectoryUnavailable
        when Slack cannot say in time, so the click is refused rather than guessed."""
        if gate is None or gate.anyone or user_id in gate.users:
            return ()
        for group in gate.groups:
            if user_id in await self.directory.members(group):
                return (group,)
        return ()

    async def refusal(self, status: Status, gate: CallGate | None) -> str | None:
        """What to tell a person whose click the script refused; None for other outcomes."""
        if status == "self":
            return messages.SELF_APPROVAL_REFUSED
        if status == "not_offered":
            return messages.APPROVE_ALWAYS_NOT_OFFERED
        if status == "unreadable":
            return messages.OTHER_VERSION
        if status == "not_allowed" and gate is not None:
            principals = [*gate.users, *gate.groups]
            names = await self.directory.names(principals)
            return messages.not_an_approver([names[p] for p in principals], gate.tool)
        return None
