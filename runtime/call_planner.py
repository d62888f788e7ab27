"""Turning the SDK's interruptions into pending calls: each with its rule, its digest and its
audit entry; the policy decides the `auto` ones on the spot."""

from __future__ import annotations

from dataclasses import dataclass

from agents import RunResult

from runtime.audit import AuditTrail
from runtime.audit_events import AuditEvent
from runtime.call_digest import call_digest
from runtime.contracts import new_approval_id
from runtime.envelope import Decision, PendingCall, RunEnvelope
from runtime.policy import Policy
from runtime.run_store import RunStore


@dataclass(kw_only=True)
class CallPlanner:
    store: RunStore
    audit: AuditTrail
    policy: Policy

    async def plan(self, envelope: RunEnvelope, result: RunResult) -> tuple[PendingCall, ...]:
        """One pending call per interruption, with its rule; the policy decides `auto` ones."""
        now = await self.store.server_time()
        calls = []
        for item in result.interruptions:
            tool, agent_name, arguments = item.name or "?", item.agent.name, item.arguments or ""
            rule = self.policy.rule_for(tool, agent_name)
            digest = call_digest(tool, arguments)
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
            call = PendingCall(
                approval_id=new_approval_id(),
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
            )
            calls.append(call)
            event = {
                "approve": AuditEvent.AUTO_APPROVED,
                "reject": AuditEvent.AUTO_REJECTED,
                None: AuditEvent.REQUESTED,
            }[rule.auto]
            await self.audit.record(event, envelope.run_id, **call_audit_fields(envelope, call))
        return tuple(calls)


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
