"""Whether a grant covers a call, checked when the call is made against the rule it falls under.

A grant made an hour ago promises nothing the policy no longer allows. It covers a call only if
- the call's rule is not `auto` (`auto = "reject"` always wins; `auto = "approve"` needs none),
  is decided by one untyped approval (never under a quorum or a typed confirmation:
  `runtime.deciders.one_by_one`) and allows grants at least that long;
- the person who granted may still decide the call, as `runtime.deciders` answers: listed in
  the rule's approvers (or in one of its groups, asked through `Membership`; when that cannot
  be answered the call asks a person), not its requester unless self-approval is allowed, and,
  for a person outside the installing workspace, only where the call's rule lets such people
  decide (`external`);
- the grant still exists and has not ended when it is used (`GrantStore.use`, atomic with a
  revocation).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from runtime.deciders import Approvers, decides, one_by_one
from runtime.grants.store import Grant, GrantStore
from runtime.record.call_rule import CallRule
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.reporter import RunView

log = logging.getLogger(__name__)


class MembershipUnavailable(Exception):
    """Who is in a user group cannot be told just now."""


class Membership(Protocol):
    async def members(self, group_id: str) -> set[str]:
        """The group's members; raises MembershipUnavailable when that cannot be told."""
        ...


class GrantNotices(Protocol):
    async def grant_used(self, run: RunView, call: PendingCall) -> None:
        """Say quietly in the run's conversation that a grant approved `call` (its decision's
        `by_grant`), with a way to revoke the grant."""
        ...


@dataclass(kw_only=True)
class GrantCheck:
    store: GrantStore
    membership: Membership | None = None
    """Without it, grants by members of approver groups cover nothing (users listed by id
    still do)."""
    allow_self_approval: bool = False

    async def covering(
        self,
        envelope: RunEnvelope,
        rule: CallRule,
        *,
        tool: str,
        agent: str,
        mcp_server: str | None = None,
        digest: str,
        call_id: str,
        approval_id: str,
        audit_details: Mapping[str, str | int] | None = None,
        before_use: Callable[[], Awaitable[None]] | None = None,
    ) -> Grant | None:
        """The grant that approves this call (its use counted and audited, its `grant_used`
        entry with `audit_details` too: the arguments as the trail keeps them), or None: ask.
        `before_use` is awaited before a grant's use is counted."""
        if (
            rule.auto is not None
            or one_by_one(quorum=rule.quorum, confirm=rule.confirm)
            or rule.grant_max_seconds <= 0
        ):
            return None
        conversation = envelope.conversation
        grants = await self.store.active(conversation.channel)
        for grant in sorted(grants, key=lambda g: g.scope != "arguments"):
            if not grant.covers(
                channel=conversation.channel,
                agent=agent,
                tool=tool,
                mcp_server=mcp_server,
                digest=digest,
            ):
                continue
            if grant.seconds > rule.grant_max_seconds:
                continue
            who = Approvers.of(
                rule.approvers,
                requester=conversation.requester,
                self_ok=self.allow_self_approval,
                external=rule.external,
            )
            if not await self._may_approve(who, grant.user_id, outside=grant.outside):
                log.info("run %s: grant %s no longer covers %s", envelope.run_id, grant.id, tool)
                continue
            if before_use is not None:
                await before_use()
            used = await self.store.use(
                grant,
                envelope.run_id,
                approval_id=approval_id,
                call_id=call_id,
                tool=tool,
                agent=agent,
                requester=conversation.requester,
                channel=conversation.channel,
                digest=digest,
                **({"mcp_server": mcp_server} if mcp_server is not None else {}),
                **(audit_details or {}),
            )
            if used is not None:
                return used
        return None

    async def _may_approve(self, who: Approvers, user: str, *, outside: bool) -> bool:
        """As the decision script would answer the person who granted, asked now; a group's
        members that cannot be told (or no `membership`) count as not a member."""
        try:
            granter = _Granter(membership=self.membership, was_outside=outside)
            return await decides(who, user, granter, outside=outside)
        except MembershipUnavailable:
            return False


@dataclass(frozen=True, kw_only=True, slots=True)
class _Granter:
    """What is known of the person who granted (`runtime.deciders.Facts`): their groups through
    `membership`, and that they are where the call is (a grant covers its own channel only);
    their standing is the one the grant recorded."""

    membership: Membership | None
    was_outside: bool

    async def members(self, group_id: str) -> set[str]:
        if self.membership is None:
            raise MembershipUnavailable(group_id)
        return await self.membership.members(group_id)

    async def present(self) -> bool:
        return True

    async def outside(self) -> bool:
        return self.was_outside
