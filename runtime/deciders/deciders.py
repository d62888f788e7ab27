"""Who may decide a call: the one answer outside the decision script, and what a group id is.

The decision script (`runtime/record/lua/decide.lua`) is the authority when a person
clicks; it reads the call's gate (`CallGate`) and is told which of the gate's groups the person
is in. Whoever must know the answer before (the Home tab choosing what to show, the click gate
choosing which groups to look up, a grant checked against the rule it falls under, the card
naming who may approve, the modal refusing before it opens) asks here, which answers as the
script does, in the script's order: `tests/runtime/deciders/test_deciders.py` runs both on the same
cases.

What the answer needs to know of the person (their groups, whether they are a member of the
installing workspace, whether they are where a call anyone may decide is) is found by the
caller, which asks Slack; `runtime.deciders.asking` asks it only what can change the answer.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

Refusal = Literal["outside", "not_allowed", "self"]
"""The script's refusals that depend on who the person is, in the order it checks them."""


def is_group(principal: str) -> bool:
    """A Slack user group id (`S…`), as opposed to a person (`U…`, `W…`) or a channel."""
    return principal.startswith("S")


def split(principals: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The people and the user groups among `principals`, each in their order."""
    listed = tuple(principals)
    return tuple(p for p in listed if not is_group(p)), tuple(p for p in listed if is_group(p))


class Listed(Protocol):
    """People and user groups named by id (the `ADMINS`, a call's approvers)."""

    @property
    def users(self) -> tuple[str, ...]: ...
    @property
    def groups(self) -> tuple[str, ...]: ...


class Deciders(Listed, Protocol):
    """Who may decide one call; `CallGate` is one, a policy rule's `Approvers` another."""

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
        users, groups = split(principals)
        return cls(
            users=users,
            groups=groups,
            anyone=not principals,
            requester=requester,
            self_ok=self_ok,
            external=external,
        )


def needs_groups(who: Deciders, user_id: str) -> bool:
    """Whether the person's groups can change the answer (else nobody need ask Slack)."""
    return not who.anyone and user_id not in who.users and bool(who.groups)


def groups_to_ask(
    who: Deciders, user_id: str, *, approving: bool = True, outside: bool = False
) -> tuple[str, ...]:
    """The groups whose members to look up, in order, to answer for `user_id`: none when their
    id settles it (listed, anyone) or when being in every group would not do either (the
    requester approving, an outsider where the call keeps them out)."""
    if not needs_groups(who, user_id):
        return ()
    if refusal(who, user_id, who.groups, approving=approving, outside=outside) is not None:
        return ()
    return who.groups


def stop_groups_to_ask(
    user_id: str,
    *,
    requester: str | None,
    admins: Listed,
    calls: Collection[tuple[Deciders, bool]],
) -> tuple[str, ...]:
    """The groups whose members to look up before a stop (`stop.lua`: the requester, the
    `ADMINS`, anyone who may decide one of the run's open calls), in order: none when the
    person's id settles it (the requester, an admin or approver listed by id, anyone stopping a
    call anyone may decide from where it is: `calls` pairs each call with that)."""
    if user_id == requester or user_id in admins.users:
        return ()
    if any(user_id in who.users for who, _ in calls):
        return ()
    if any(who.anyone and here for who, here in calls):
        return ()
    return tuple(sorted({*admins.groups, *(g for who, _ in calls for g in who.groups)}))


def refusal(
    who: Deciders,
    user_id: str,
    member_of: Collection[str] = (),
    *,
    approving: bool = True,
    outside: bool = False,
    absent: bool = False,
) -> Refusal | None:
    """Why the script would refuse `user_id`'s decision, or None when they may decide.

    `member_of`: groups the person is in (only the gate's count); `approving`: an approval, not
    a rejection (the requester may always reject); `outside`: the person is no full member of
    the installing workspace; `absent`: deciding from the Home tab a call anyone may decide,
    they are a member of neither its channel nor a copy's."""
    if outside and not who.external:
        return "outside"
    anyone = who.anyone and not absent
    if not (anyone or user_id in who.users or any(g in who.groups for g in member_of)):
        return "not_allowed"
    if approving and own_call(who, user_id):
        return "self"
    return None


def may_decide(
    who: Deciders,
    user_id: str,
    member_of: Collection[str] = (),
    *,
    outside: bool = False,
    absent: bool = False,
) -> bool:
    """Whether `user_id` may approve the call (`refusal` is None)."""
    return refusal(who, user_id, member_of, outside=outside, absent=absent) is None


def own_call(who: Deciders, user_id: str) -> bool:
    """The person asked for the call and may only reject it (no self-approval)."""
    return user_id == who.requester and not who.self_ok


def may_approve(principals: Iterable[str], *, requester: str, self_ok: bool) -> tuple[str, ...]:
    """Of a call's approvers, those a card, a reminder or a quorum's progress names as able to
    approve: all but the requester, unless self-approval is allowed."""
    return tuple(p for p in principals if self_ok or p != requester)


def too_few(approvers: Collection[str], quorum: int) -> int | None:
    """How many people may approve, when that is known before any click and fewer than
    `quorum`, so that no call could ever be approved; None when anyone may, when a group is
    among them (its members are counted only at click time), or when there are enough."""
    people = set(approvers)
    if not people or any(is_group(p) for p in people) or quorum <= len(people):
        return None
    return len(people)


def one_by_one(*, quorum: int, confirm: str | None) -> bool:
    """A call each person decides on its own: under a quorum (every approval counts) or a typed
    confirmation (every approval is typed). No grant, Approve always or batch decides it."""
    return quorum > 1 or confirm is not None


def outsider_may_stop(calls: Collection[Deciders], *, outsiders_allowed: bool) -> bool:
    """Whether someone outside the installing workspace may stop a run: where
    `EXTERNAL_DECIDERS=allow`, or where they may decide every call of the run's round (`calls`),
    since stopping decides them all."""
    return outsiders_allowed or (bool(calls) and all(who.external for who in calls))
