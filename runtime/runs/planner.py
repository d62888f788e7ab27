"""A run stopped for approvals: one pending call per interruption, each judged by the policy
(`runtime.policy.verdicts`) on the arguments as its tool receives them, with its digest, where
its tool comes from, and its audit entry.

Then, call by call and in this order, something may stand in for a person, each only where the
verdict allows it: the rule's `auto` (a rejection always wins), a permission an **Approve
always** made in this run for the same tool, agent and rule (`runtime.record.permissions`),
a grant (`runtime.grants.check`). Each such call is audited on its own before it can run, once
however often a redelivered job decides its turn again. A
call that needs a card also gets what the card shows beyond its arguments: why the model asked,
the tool's preview, and its schema for edits (function tools only: an MCP tool is rebuilt from
each listing)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agents import RunResult, ToolApprovalItem
from redis.exceptions import RedisError

from runtime.agent_graph import callers
from runtime.audit.trail import AuditTrail
from runtime.calls.description import tool_kind
from runtime.calls.digest import ArgumentsTooLarge, call_digest
from runtime.calls.previews import PreviewFunction, preview_of, run_previews
from runtime.grants.check import GrantCheck, GrantNotices
from runtime.jobs.contracts import new_approval_id
from runtime.judging.arguments import ArgumentSchema
from runtime.mcp.origin import mcp_server_of
from runtime.mcp.tools import McpTools
from runtime.policy import Policy
from runtime.policy.verdicts import Verdict, judge
from runtime.record.call_rule import UNAPPROVABLE, CallRule
from runtime.record.choices import GrantRef
from runtime.record.envelope import Approval, Decision, PendingCall, RunEnvelope, UnjudgedRule
from runtime.record.permissions import AlwaysPermission, RuleKey, covering
from runtime.record.store import RunStore
from runtime.reporter import RunView
from runtime.runs.call_audit import decided_entry
from runtime.runs.call_context import editable_schema, function_tool_of, judged_arguments, why_of


async def _nothing() -> None:
    return None


log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True, slots=True)
class Planned:
    """One round's calls, as judged."""

    calls: tuple[PendingCall, ...]
    rules: dict[str, CallRule] = field(default_factory=dict)
    """Approval id -> the rule each call must satisfy (its reach is planned from it)."""
    keys: dict[str, RuleKey] = field(default_factory=dict)
    """Approval id -> what an Approve always on it binds, for the calls that offer one."""


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
        self,
        envelope: RunEnvelope,
        result: RunResult,
        *,
        now: float,
        permissions: tuple[AlwaysPermission, ...] = (),
        before_deciding: Callable[[], Awaitable[None]] = _nothing,
    ) -> Planned:
        """One pending call per interruption, judged and asked at `now` (Redis's clock); what
        stands in for a person decided some (each audited). `before_deciding` is awaited
        before a call is decided without a person (a grant used, a decision audited): the
        model turns that asked for the calls are journaled then (`runtime.record.turns`)."""
        why = why_of(result)
        calls, rules, keys = [], {}, {}
        previews: dict[str, tuple[PreviewFunction, str]] = {}
        for item in result.interruptions:
            call, verdict = await self._pending(
                envelope, result, item, now, why, permissions, before_deciding
            )
            calls.append(call)
            rules[call.approval_id] = verdict.rule
            if verdict.key is not None:
                keys[call.approval_id] = verdict.key
            shown = preview_of(function_tool_of(item)) if verdict.rule.preview else None
            if call.decision is None and shown is not None:
                previews[call.call_id] = (shown, call.arguments)
        texts = await run_previews(previews, run_id=envelope.run_id)
        calls = [c.model_copy(update={"preview": texts.get(c.call_id)}) for c in calls]
        if any(call.decision is not None for call in calls):
            await before_deciding()
        for call in calls:
            await self._announce(envelope, call)
        return Planned(calls=tuple(calls), rules=rules, keys=keys)

    async def _pending(
        self,
        envelope: RunEnvelope,
        result: RunResult,
        item: ToolApprovalItem,
        now: float,
        why: str | None,
        permissions: tuple[AlwaysPermission, ...],
        before_deciding: Callable[[], Awaitable[None]],
    ) -> tuple[PendingCall, Verdict]:
        tool, agent_name = item.name or "?", item.agent.name
        server, description = self._origin(item)
        # What will run, as the tool receives it: a shell or patch call's own description.
        arguments = judged_arguments(item, self._schema(item, server))
        verdict = await judge(
            self.policy,
            tool=tool,
            agent=agent_name,
            mcp_server=server,
            arguments=arguments,
            conversation=envelope.conversation,
        )
        rule = verdict.rule
        approval_id = new_approval_id()
        decision: Decision | None
        try:
            digest = call_digest(tool, arguments.text, server, kind=tool_kind(item))
        except ArgumentsTooLarge as error:
            # No digest can bind it, so no person can approve it: the model is told why.
            digest = hashlib.sha256(arguments.text.encode()).hexdigest()
            decision = _by_policy("rejected", str(error), digest, now)
        else:
            decision = await self._stand_in(
                envelope,
                verdict,
                item,
                permissions,
                before_deciding,
                server=server,
                digest=digest,
                approval_id=approval_id,
                now=now,
            )
        schema = editable_schema(item)
        call = PendingCall(
            approval_id=approval_id,
            call_id=item.call_id or "",
            tool=tool,
            agent=agent_name,
            arguments=arguments.text,
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
            answer=rule.answer,
            grant_max_seconds=rule.grant_max_seconds,
            review_output=rule.review_output,
            inside=callers(result.last_agent, item.agent),
            external=rule.external,
            when=rule.when,
            rule_name=rule.name,
            confirm=rule.confirm,
            unjudged=tuple(UnjudgedRule(rule=u.rule, reason=u.reason) for u in rule.unjudged),
            invalid=arguments.problem,
            channel=rule.channel if envelope.conversation.direct else None,
        )
        return call, verdict

    async def _stand_in(
        self,
        envelope: RunEnvelope,
        verdict: Verdict,
        item: ToolApprovalItem,
        permissions: tuple[AlwaysPermission, ...],
        before_deciding: Callable[[], Awaitable[None]],
        *,
        server: str | None,
        digest: str,
        approval_id: str,
        now: float,
    ) -> Decision | None:
        """What decides the call without a card, if anything: its rule's `auto`, an Approve
        always of this run under the same rule, a grant."""
        rule = verdict.rule
        if rule.auto == "reject":
            return _by_policy("rejected", _rejection_reason(rule), digest, now)
        if rule.auto == "approve":
            return _by_policy("approved", "auto-approve rule", digest, now)
        permission = covering(permissions, verdict.key) if verdict.key is not None else None
        if permission is not None:
            return _approved_without_card(
                permission.user_id,
                permission.user_name,
                digest,
                now,
                approvals=(
                    Approval(
                        user_id=permission.user_id,
                        user_name=permission.user_name,
                        outcome="approved_always",
                        at=permission.at,
                    ),
                ),
            )
        return await self._by_grant(
            envelope,
            rule,
            item,
            server=server,
            digest=digest,
            approval_id=approval_id,
            now=now,
            arguments=verdict.arguments.text if verdict.arguments else "",
            before_use=before_deciding,
        )

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
        before_use: Callable[[], Awaitable[None]],
    ) -> Decision | None:
        """The approval of a grant that covers this call (its use counted and audited)."""
        if self.grants is None or rule.grant_max_seconds <= 0:
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
            before_use=before_use,
        )
        if grant is None:
            return None
        return _approved_without_card(
            grant.user_id, grant.user_name, digest, now, by_grant=grant.ref()
        )

    def _origin(self, item: ToolApprovalItem) -> tuple[str | None, str | None]:
        """The MCP server of a call (None: a function tool) and the tool's listed description."""
        server = mcp_server_of(item)
        listed = self.mcp.info(item.agent.name, item.name or "") if self.mcp else None
        if server is None or listed is None:
            return server, None
        return listed.server, listed.description or None

    def _schema(self, item: ToolApprovalItem, server: str | None) -> ArgumentSchema | None:
        """An MCP tool's listed schema (a function tool's is its own: `judged_arguments`)."""
        if server is None or self.mcp is None:
            return None
        return self.mcp.schema(item.agent.name, item.name or "")

    async def _announce(self, envelope: RunEnvelope, call: PendingCall) -> None:
        """The audit entry of a call decided without a person (a grant's use was audited as it
        was counted; a call that asks is audited as it opens), and a grant's quiet line: once
        per call, however often a redelivered job decides its turn again."""
        decision = call.decision
        if decision is None:
            return  # audited as requested by the script that opens it (`requested`)
        by_grant = decision.by_grant is not None
        entry = "" if by_grant else decided_entry(self.audit, envelope, call, decision)
        try:
            first = await self.store.announce(envelope.run_id, call.call_id, entry)
        except RedisError as error:
            # As `AuditTrail.record`: the trail must not fail the step it describes.
            log.warning(
                "run %s: audit entry of call %s not stored (%s: Redis unreachable)",
                envelope.run_id,
                call.call_id,
                type(error).__name__,
            )
            first = True
        if by_grant and first and self.notices is not None:
            await self.notices.grant_used(RunView.of(envelope), call)


def _rejection_reason(rule: CallRule) -> str:
    """Why the policy rejected a call, as the model reads it: a rule that says so, or nobody
    who could approve it under the rules it may fall under (and which could not be judged)."""
    if rule.refusal is None:
        return "auto-reject rule"
    why = "; ".join(f"the rule {u.rule} could not be judged: {u.reason}" for u in rule.unjudged)
    return f"{UNAPPROVABLE}: {rule.refusal}" + (f" ({why})" if why else "")


def _approved_without_card(
    user_id: str,
    user_name: str | None,
    digest: str,
    now: float,
    *,
    approvals: tuple[Approval, ...] = (),
    by_grant: GrantRef | None = None,
) -> Decision:
    """An approval no card asked for: by an Approve always of the run, or by a grant."""
    return Decision(
        outcome="approved",
        user_id=user_id,
        user_name=user_name,
        reason=None,
        decided_at=now,
        digest=digest,
        approvals=approvals,
        by_grant=by_grant,
    )


def _by_policy(outcome: str, reason: str, digest: str, now: float) -> Decision:
    """A decision nobody was asked for: an `auto` rule's, or a call no person could approve."""
    return Decision(
        outcome="approved" if outcome == "approved" else "rejected",
        user_name="policy",
        reason=reason,
        decided_at=now,
        digest=digest,
        by_policy=True,
    )
