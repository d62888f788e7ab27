"""**Approve always**: a permission of one run, bound to the rule the approved call fell under.

The SDK's own `always_approve` is keyed by tool name: once given, later calls of the tool never
came back to Countersign, so a call the policy rejects, or keeps for other approvers, or asks
a typed confirmation for, ran with no card and no rule judged. Countersign never gives it
(`runtime.runs.state_decisions`). Instead, **Approve always** on a call makes a permission of
the run: the tool, the agent, the MCP server, the rule the call fell under and the policy's
version (`RuleKey`). Every later call of any tool is judged by the policy first
(`runtime.policy.verdicts`); a permission approves only a call of the same tool and agent that
falls under the same rule of the same policy, where that rule offers Approve always (so never
under a `when` that could not be judged, arguments that do not fit the tool, or a requester from
outside the workspace). Each call so approved is audited on its own (`approved`, `via: always`,
by the person who pressed it, with its digest) before it runs.

Stored in the run record, beside the fields an earlier version reads (`runtime.record.layout`):
`rules` names the rule key of each call of the round that offers Approve always (read by the
decision script, which covers a call of the same round and rule waiting beside the approved one),
and `always` holds the run's permissions, written with each round.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from runtime.record import layout as rr
from runtime.record.envelope import PendingCall


class RuleKey(BaseModel):
    """What an Approve always is bound to."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    tool: str
    agent: str
    mcp_server: str | None = None
    rule: int | None
    """The rule's place in the policy; None: no rule, the environment's defaults."""
    policy: str
    """The policy's version (`Policy.version`)."""

    @property
    def token(self) -> str:
        """The key as one string, compared as it is (by the decision script too)."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))


class AlwaysPermission(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    key: RuleKey
    user_id: str
    """Who pressed Approve always (the last of a quorum that all chose it)."""
    user_name: str | None = None
    approval_id: str
    """The call it was pressed on."""
    at: float


_PERMISSIONS = TypeAdapter(tuple[AlwaysPermission, ...])
_KEYS = TypeAdapter(dict[str, str])


def parse_permissions(raw: bytes) -> tuple[AlwaysPermission, ...]:
    """The run's permissions; none when absent or written by a version this one cannot read
    (which only asks more people)."""
    try:
        return _PERMISSIONS.validate_json(raw) if raw else ()
    except ValidationError:
        return ()


def dump_permissions(permissions: tuple[AlwaysPermission, ...]) -> str:
    return _PERMISSIONS.dump_json(permissions).decode()


def parse_rule_keys(raw: bytes) -> dict[str, str]:
    """Approval id -> its rule key's `token`, for the round's calls that offer Approve always."""
    try:
        return _KEYS.validate_json(raw) if raw else {}
    except ValidationError:
        return {}


def covering(permissions: tuple[AlwaysPermission, ...], key: RuleKey) -> AlwaysPermission | None:
    """The permission that approves a call under `key`, if any."""
    return next((p for p in permissions if p.key.token == key.token), None)


def granted(
    calls: Iterable[PendingCall],
    rule_keys: Mapping[str, str],
    permissions: tuple[AlwaysPermission, ...],
) -> tuple[AlwaysPermission, ...]:
    """`permissions` and those the round's Approve always decisions make: one per call decided
    `approved_always` (every approver chose it) under a rule that offered it, as the round
    asked it. An edited call makes none: its arguments may fall under another rule."""
    found = {p.key.token: p for p in permissions}
    for call in calls:
        decision, token = call.decision, rule_keys.get(call.approval_id)
        if decision is None or decision.outcome != "approved_always" or token is None:
            continue
        if decision.edit is not None or decision.user_id is None:
            continue
        try:
            key = RuleKey.model_validate_json(token)
        except ValidationError:
            continue
        found.setdefault(
            key.token,
            AlwaysPermission(
                key=key,
                user_id=decision.user_id,
                user_name=decision.user_name,
                approval_id=call.approval_id,
                at=decision.decided_at,
            ),
        )
    return tuple(found.values())


def permission_fields(
    calls: Iterable[PendingCall],
    keys: Mapping[str, RuleKey],
    permissions: tuple[AlwaysPermission, ...],
) -> dict[str, str]:
    """The run record's fields for a new round: the run's permissions, and the rule key of each
    open call that offers Approve always (`runtime.record.layout`)."""
    open_keys = {
        call.approval_id: keys[call.approval_id].token
        for call in calls
        if call.decision is None and call.approval_id in keys
    }
    return {rr.ALWAYS: dump_permissions(permissions), rr.RULES: json.dumps(open_keys)}
