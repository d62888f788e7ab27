"""Turning the SDK's interruptions into pending calls: each with its rule, its digest and its
audit entry; the policy decides the `auto` ones on the spot, and a grant covers others (checked
here, at call time). A call that needs a card also gets what the card shows beyond its
arguments: why the model asked, the tool's preview, and its schema for edits."""

from __future__ import annotations

from dataclasses import dataclass

from agents import RunResult

from runtime.audit import AuditTrail
from runtime.audit_events import AuditEvent
from runtime.call_context import editable_schema, function_tool_of, why_of
from runtime.call_digest import call_digest
from runtime.contracts import new_approval_id
from runtime.envelope import Decision, PendingCall, RunEnvelope
from runtime.grant_check import GrantCheck, GrantNotices
from runtime.policy import Policy
from runtime.previews import PreviewFunction, preview_of, run_previews
from runtime.reporter import RunView
from runtime.run_store import RunStore


@dataclass(kw_only=True)
class CallPlanner:
    store: RunStore
    audit: AuditTrail
    policy: Policy
    grants: GrantCheck | None = None
    """Grants people made (`runtime.grant_check`); None: every call asks."""
    notices: GrantNotices | None = None

    async def plan(self, envelope: RunEnvelope, result: RunResult) -> tuple[PendingCall, ...]:
        """One pending call per interruption, with its rule; the policy decides `auto` ones,
        a grant covers others."""
        now = await self.store.server_time()
        why = why_of(result)
        calls = []
        previews: dict[str, tuple[PreviewFunction, str]] = {}
        for item in result.interruptions:
            tool, agent_name, arguments = item.name or "?", item.agent.name, item.arguments or ""
            rule = self.policy.rule_for(tool, agent_name)
            digest = call_digest(tool, arguments)
            approval_id = new_approval_id()
            decision = None
            if rule.auto is not None:
                decision = Decision(
                    outcome="approved" if rule.auto == "approve" else "rejected",
                    user_name="policy",
                    reason=f"auto-{rule.auto} rule",
                    decided_at=now,
                    digest=digest,
                    by_policy=True,
                )
            elif self.grants is not None:
                grant = await self.grants.covering(
                    envelope,
                    rule,
                    tool=tool,
                    agent=agent_name,
                    digest=digest,
                    call_id=item.call_id or "",
                    approval_id=approval_id,
                )
                if grant is not None:
                    decision = Decision(
                        outcome="approved",
                        user_id=grant.user_id,
                        user_name=grant.user_name,
                        reason=None,
                        decided_at=now,
                        digest=digest,
                        by_grant=grant.ref(),
                    )
            schema = editable_schema(item)
            call = PendingCall(
                approval_id=approval_id,
                call_id=item.call_id or "",
                tool=tool,
                agent=agent_name,
                arguments=arguments,
                expires_at=now + rule.ttl_seconds,
                approvers=rule.approvers,
                quorum=rule.quorum,
                allow_always=rule.allow_always,
                digest=digest,
                decision=decision,
                why=why,
                params_schema=schema,
                allow_edit=rule.allow_edit and schema is not None,
                grant_max_seconds=rule.grant_max_seconds,
            )
            calls.append(call)
            if decision is None and (shown := preview_of(function_tool_of(item))) is not None:
                previews[call.call_id] = (shown, arguments)
        texts = await run_previews(previews, run_id=envelope.run_id)
        calls = [c.model_copy(update={"preview": texts.get(c.call_id)}) for c in calls]
        for call in calls:
            await self._announce(envelope, call)
        return tuple(calls)

    async def _announce(self, envelope: RunEnvelope, call: PendingCall) -> None:
        """The audit entry (a grant's use was audited as it was counted), and the quiet line."""
        if call.decision is not None and call.decision.by_grant is not None:
            if self.notices is not None:
                await self.notices.grant_used(RunView.of(envelope), call)
            return
        event = AuditEvent.REQUESTED
        if call.decision is not None:
            approved = call.decision.outcome == "approved"
            event = AuditEvent.AUTO_APPROVED if approved else AuditEvent.AUTO_REJECTED
        await self.audit.record(event, envelope.run_id, **call_audit_fields(envelope, call))


def call_audit_fields(envelope: RunEnvelope, call: PendingCall) -> dict[str, str | int | None]:
    return {
        "approval_id": call.approval_id,
        "call_id": call.call_id,
        "tool": call.tool,
        "agent": call.agent,
        "requester": envelope.conversation.requester,
        "channel": envelope.conversation.channel,
        "digest": call.digest,
        "quorum": call.quorum,
    }
