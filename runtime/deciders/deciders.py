"""Who may decide a call: the one answer outside the decision script, and what a group id is.

The decision script (`runtime/record/lua/decide.lua`) is the authority when a person
clicks; it reads the call's gate (`CallGate`) and is told which of the gate's groups the person
is in. Whoever must know the answer before (the Home tab choosing what to show, the click gate
choosing which groups to look up, a grant checked against the rule it falls under) asks
`refusal` here, which answers as the script does: `tests/test_deciders.py` runs both on the
same cases.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal, Protocol

Refusal = Literal["outside", "not_allowed", "self"]
"""The script's refusals that depend on who the person is, in the order it checks them."""


def is_group(principal: str) -> bool:
    """A Slack user group id (`S…`), as opposed to a person (`U…`, `W…`) or a channel."""
    return principal.startswith("S")


class Deciders(Protocol):
    """Who may decide one call; `CallGate` is one, a policy rule's `Approvers` another."""

    @property
    def users(self) -> tuple[str, ...]: ...
    @property
    def groups(self) -> tuple[str, ...]: ...
    @property
    def anyone(self) -> bool:
        """Anyone (where the call's card is) may decide."""
        ...

    @property
    def requester(self) -> str: ...
    @property
    def self_ok(self) -> bool:
        """The requester may approve their own run's call."""
        ...

    @property
    def external(self) -> bool:
        """People outside the installing workspace may decide."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Approvers:
    """`Deciders` from a list of principals (a rule's `approvers`; none: anyone)."""

    users: tuple[str, ...]
    groups: tuple[str, ...]
    anyone: bool
    requester: str
    self_ok: bool
    external: bool = False

    @classmethod
    def of(
        cls, principals: Collection[str], *, requester: str, self_ok: bool, external: bool = False
    ) -> Approvers:
        return cls(
            users=tuple(p for p in principals if not is_group(p)),
            groups=tuple(p for p in principals if is_group(p)),
            anyone=not principals,
            requester=requester,
            self_ok=self_ok,
            external=external,
        )


def needs_groups(who: Deciders, user_id: str) -> bool:
    """Whether the person's groups can change the answer (else nobody need ask Slack)."""
    return not who.anyone and user_id not in who.users and bool(who.groups)


def refusal(
    who: Deciders,
    user_id: str,
    member_of: Collection[str] = (),
    *,
    approving: bool = True,
    outside: bool = False,
) -> Refusal | None:
    """Why the script would refuse `user_id`'s decision, or None when they may decide.

    `member_of`: groups the person is in (only the gate's count); `approving`: an approval, not
    a rejection (the requester may always reject); `outside`: the person is no full member of
    the installing workspace."""
    if outside and not who.external:
        return "outside"
    if not (who.anyone or user_id in who.users or any(g in who.groups for g in member_of)):
        return "not_allowed"
    if approving and user_id == who.requester and not who.self_ok:
        return "self"
    return None


def may_decide(
    who: Deciders, user_id: str, member_of: Collection[str] = (), *, outside: bool = False
) -> bool:
    """Whether `user_id` may approve the call (`refusal` is None)."""
    return refusal(who, user_id, member_of, outside=outside) is None
