"""Who may press the buttons on a card: the policy's approvers, and never the requester alone.

Checked before the decision script runs; a refused click records nothing but a `denied` entry
in the audit trail, and the person is told who may decide instead.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from bot import messages
from bot.approvers import ApproverDirectory, DirectoryUnavailable
from bot.payloads import SlackUser
from runtime.approvals import AuditContext
from runtime.audit import AuditTrail
from runtime.envelope import PendingCall, RunEnvelope


@dataclass(kw_only=True)
class ApprovalGate:
    directory: ApproverDirectory
    audit: AuditTrail
    allow_self_approval: bool

    async def refusal(
        self, envelope: RunEnvelope, call: PendingCall, actor: SlackUser
    ) -> str | None:
        """None if `actor` may decide `call`; otherwise what to tell them."""
        if actor.id == envelope.conversation.requester and not self.allow_self_approval:
            await self._deny(envelope, call, actor, "self_approval")
            return messages.SELF_APPROVAL_REFUSED
        try:
            if await self.directory.may_decide(actor.id, call.approvers):
                return None
        except DirectoryUnavailable:
            return messages.DIRECTORY_UNAVAILABLE
        await self._deny(envelope, call, actor, "not_an_approver")
        names = await self.directory.names(call.approvers)
        return messages.not_an_approver([names[p] for p in call.approvers], call.tool)

    async def _deny(
        self, envelope: RunEnvelope, call: PendingCall, actor: SlackUser, reason: str
    ) -> None:
        await self.audit.record(
            "denied",
            envelope.run_id,
            **asdict(AuditContext.of(envelope, call)),
            user_id=actor.id,
            user_name=actor.display,
            reason=reason,
        )
