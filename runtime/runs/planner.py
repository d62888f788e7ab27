"""A run stopped for approvals: one pending call per interruption, each with its rule, its
digest and where its tool comes from, and its audit entry. The policy decides the `auto` ones on
the spot, and a grant covers others (checked here, at call time). A call that needs a card also
gets what the card shows beyond its arguments: why the model asked, the tool's preview, and its
schema for edits (function tools only: an MCP tool is rebuilt from each listing)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agents import RunResult, ToolApprovalItem

from runtime.audit.events import AuditEvent
from runtime.audit.trail import AuditTrail
from runtime.calls.context import editable_schema, function_tool_of, why_of
from runtime.calls.description import described_arguments, tool_kind
from runtime.calls.digest import ArgumentsTooLarge, call_digest
from runtime.calls.previews import PreviewFunction, preview_of, run_previews
from runtime.conditions import CallFacts
from runtime.grants.check import GrantCheck, GrantNotices
from runtime.jobs.contracts import new_approval_id
from runtime.mcp.origin import mcp_server_of
from runtime.mcp.tools import McpTools
from runtime.policy import CallRule, Policy
from runtime.record.envelope import Decision, PendingCall, RunEnvelope
from runtime.record.store import RunStore
from runtime.reporter import RunView
from runtime.runs.agent_graph import callers


@dataclass(kw_only=True)
class CallPlanner:
    policy: Policy
    store: RunStore
    audit: AuditTrail
    mcp: McpTools | None = None
    grants: GrantCheck | None = None
    """Grants people made (`runtime.grants.check`); None: every call asks."""
    notices: GrantNotices | None = None

    async def plan(
        self, envelope: RunEnvelope, result: RunResult, *, now: float
    ) -> tuple[PendingCall, ...]:
        """One pending call per interruption, with its rule, asked at `now` (Redis's clock); the
        policy decides `auto` ones, a grant covers others; each decided one is audited."""
        why = why_of(result)
        calls = []
        previews: dict[str, tuple[PreviewFunction, str]] = {}
        for item in result.interruptions:
            call, rule = await self._pending(envelope, result, item, now, why)
            calls.append(call)
            shown = preview_of(function_tool_of(item)) if rule.preview else None
            if call.decision is None and shown is not None:
                previews[call.call_id] = (shown, call.arguments)
        texts = await run_previews(previews, run_id=envelope.run_id)
        calls = [c.model_copy(update={"preview": texts.get(c.call_id)}) for c in calls]
        for call in calls:
            await self._announce(envelope, call)
        return tuple(calls)

    async def _pending(
        self,
        envelope: RunEnvelope,
        result: RunResult,
        item: ToolApprovalItem,
        now: float,
        why: str | None,
    ) -> tuple[PendingCall, CallRule]:
        # What will run: the model's arguments, or a shell or patch call's own description.
        tool, agent_name, arguments = item.name or "?", item.agent.name, described_arguments(item)
        server, description = self._origin(item)
        facts = CallFacts(
            arguments=arguments,
            tool=tool,
            agent=agent_name,
            mcp_server=server,
            channel=envelope.conversation.channel,
            requester=envelope.conversation.requester,
        )
        rule = self.policy.rule_for(tool, agent_name, server, facts)
        approval_id = new_approval_id()
        try:
            digest = call_digest(tool, arguments, server, kind=tool_kind(item))
        except ArgumentsTooLarge as error:
            # No digest can bind it, so no person can approve it: the model is told why.
            digest = hashlib.sha256(arguments.encode()).hexdigest()
            decision: Decision | None = _by_policy("rejected", str(error), digest, now)
        else:
            if rule.auto is not None:
                decision = _by_policy(rule.auto, f"auto-{rule.auto} rule", digest, now)
            else:
                decision = await self._by_grant(
                    envelope,
                    rule,
                    item,
                    server=server,
                    digest=digest,
                    approval_id=approval_id,
                    now=now,
                    arguments=arguments,
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
            mcp_server=server,
            description=description,
            decision=decision,
            why=why,
            params_schema=schema,
            allow_edit=rule.allow_edit and schema is not None,
            grant_max_seconds=rule.grant_max_seconds,
            inside=callers(result.last_agent, item.agent),
            external=rule.external,
            when=rule.when,
            rule_name=rule.name,
            confirm=rule.confirm,
        )
        return call, rule

    async def _by_grant(
        self,
        envelope: RunEnvelope,
        rule: CallRule,
        item: ToolApprovalItem,
        *,
        server: str | None,
        digest: str,
        approval_id: str,
        now: float,
        arguments: str,
    ) -> Decision | None:
        """The approval of a grant that covers this call (its use counted and audited)."""
        if self.grants is None:
            return None
        grant = await self.grants.covering(
            envelope,
            rule,
            tool=item.name or "?",
            agent=item.agent.name,
            mcp_server=server,
            digest=digest,
            call_id=item.call_id or "",
            approval_id=approval_id,
            audit_details=self.audit.arguments.fields(arguments),
        )
        if grant is None:
            return None
        return Decision(
            outcome="approved",
            user_id=grant.user_id,
            user_name=grant.user_name,
            reason=None,
            decided_at=now,
            digest=digest,
            by_grant=grant.ref(),
        )

    def _origin(self, item: ToolApprovalItem) -> tuple[str | None, str | None]:
        """The MCP server of a call (None: a function tool) and the tool's listed description."""
        server = mcp_server_of(item)
        listed = self.mcp.info(item.agent.name, item.name or "") if self.mcp else None
        if server is None or listed is None:
            return server, None
        return listed.server, listed.description or None

    async def _announce(self, envelope: RunEnvelope, call: PendingCall) -> None:
        """The audit entry of a call decided without a person (a grant's use was audited as it
        was counted; a call that asks is audited as it opens), and the quiet line."""
        if call.decision is not None and call.decision.by_grant is not None:
            if self.notices is not None:
                await self.notices.grant_used(RunView.of(envelope), call)
            return
        if call.decision is None:
            return  # audited as requested by the script that opens it (`requested`)
        approved = call.decision.outcome == "approved"
        event = AuditEvent.AUTO_APPROVED if approved else AuditEvent.AUTO_REJECTED
        kept = self.audit.arguments.fields(call.arguments)
        await self.audit.record(event, envelope.run_id, **audit_fields(envelope, call), **kept)


def requested(
    audit: AuditTrail, envelope: RunEnvelope, calls: tuple[PendingCall, ...]
) -> tuple[str, ...]:
    """The `requested` audit entries of the calls that ask a person, for the script that opens
    them (`RunStore.wait_for_approvals`), with who may decide (comma-separated; empty: anyone
    in the channel) and the arguments as the trail keeps them."""
    return tuple(
        audit.entry(
            AuditEvent.REQUESTED,
            envelope.run_id,
            **audit_fields(envelope, call),
            approvers=",".join(call.approvers),
            **audit.arguments.fields(call.arguments),
        )
        for call in calls
        if call.decision is None
    )


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
        # The `when` of the rule that chose who decides, for whoever reads the trail.
        **({"when": call.when} if call.when else {}),
        **({"rule": call.rule_name} if call.rule_name else {}),
    }


def _by_policy(outcome: str, reason: str, digest: str, now: float) -> Decision:
    """A decision nobody was asked for: an `auto` rule's, or a call no digest can bind."""
    return Decision(
        outcome="approved" if outcome == "approve" else "rejected",
        user_name="policy",
        reason=reason,
        decided_at=now,
        digest=digest,
        by_policy=True,
    )
