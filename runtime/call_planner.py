"""A run stopped for approvals: one pending call per interruption, each with its rule, its
digest and where its tool comes from; the policy decides the `auto` ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agents import RunResult, ToolApprovalItem

from runtime.audit import AuditTrail
from runtime.audit_events import AuditEvent
from runtime.call_digest import call_digest
from runtime.contracts import new_approval_id
from runtime.envelope import Decision, PendingCall, RunEnvelope
from runtime.mcp_origin import mcp_server_of
from runtime.mcp_tools import McpTools
from runtime.policy import Policy
from runtime.run_store import RunStore

EVENTS = {
    "approve": AuditEvent.AUTO_APPROVED,
    "reject": AuditEvent.AUTO_REJECTED,
    None: AuditEvent.REQUESTED,
}


@dataclass(kw_only=True)
class CallPlanner:
    policy: Policy
    store: RunStore
    audit: AuditTrail
    mcp: McpTools | None = None

    async def plan(self, envelope: RunEnvelope, result: RunResult) -> tuple[PendingCall, ...]:
        """One pending call per interruption, audited as requested or decided by the policy."""
        now = await self.store.server_time()
        calls = []
        for item in result.interruptions:
            call, auto = self._pending(item, now)
            calls.append(call)
            await self.audit.record(EVENTS[auto], envelope.run_id, **audit_fields(envelope, call))
        return tuple(calls)

    def _pending(
        self, item: ToolApprovalItem, now: float
    ) -> tuple[PendingCall, Literal["approve", "reject"] | None]:
        tool, agent_name, arguments = item.name or "?", item.agent.name, item.arguments or ""
        server, description = self._origin(item)
        rule = self.policy.rule_for(tool, agent_name, server)
        digest = call_digest(tool, arguments, server)
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
            mcp_server=server,
            description=description,
            decision=decision,
        )
        return call, rule.auto

    def _origin(self, item: ToolApprovalItem) -> tuple[str | None, str | None]:
        """The MCP server of a call (None: a function tool) and the tool's listed description."""
        server = mcp_server_of(item)
        listed = self.mcp.info(item.agent.name, item.name or "") if self.mcp else None
        if server is None or listed is None:
            return server, None
        return listed.server, listed.description or None


def audit_fields(envelope: RunEnvelope, call: PendingCall) -> dict[str, str | int | None]:
    return {
        **({"mcp_server": call.mcp_server} if call.mcp_server else {}),
        "approval_id": call.approval_id,
        "call_id": call.call_id,
        "tool": call.tool,
        "agent": call.agent,
        "requester": envelope.conversation.requester,
        "channel": envelope.conversation.channel,
        "digest": call.digest,
        "quorum": call.quorum,
    }
