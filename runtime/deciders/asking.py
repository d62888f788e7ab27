"""Asking only what can change the answer: the facts about a person that "may they decide"
needs, looked up by the caller (from Slack, through `Facts`), each only once the answers known
so far leave it open.

A click asks Slack while Slack waits for its acknowledgement, and the Home tab asks for every
open call it might list; a lookup that cannot change the answer (the groups of a person listed
by id, anything about the requester approving their own call) costs time and Slack's rate
limits for nothing. The order, cheapest first: the person's id, then their groups (one is
enough), then whether they are where a call anyone may decide is, then whether they are a member
of the installing workspace. The answer itself is `refusal`'s (`runtime.deciders.deciders`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from runtime.deciders.deciders import Deciders, groups_to_ask, refusal


class Members(Protocol):
    async def members(self, group_id: str) -> Collection[str]:
        """Who is in the user group (raise to say it cannot be told: the caller decides)."""
        ...


class Facts(Members, Protocol):
    """What the caller can find out about one person, for one call."""

    async def present(self) -> bool:
        """For a call anyone may decide: the person is a member of its channel or a copy's."""
        ...

    async def outside(self) -> bool:
        """The person is no full member of the installing workspace."""
        ...


async def groups_of(
    who: Deciders,
    user_id: str,
    directory: Members,
    *,
    approving: bool = True,
    outside: bool = False,
) -> tuple[str, ...]:
    """The call's groups `user_id` is in (the first found: one is enough), asking `directory`
    only for the groups that can change the answer (`groups_to_ask`)."""
    groups = groups_to_ask(who, user_id, approving=approving, outside=outside)
    return await first_member_of(user_id, groups, directory)


async def first_member_of(
    user_id: str, groups: Collection[str], directory: Members
) -> tuple[str, ...]:
    """The first of `groups` (in their order) that `user_id` is in, or none."""
    for group in groups:
        if user_id in await directory.members(group):
            return (group,)
    return ()


async def decides(
    who: Deciders,
    user_id: str,
    facts: Facts,
    *,
    approving: bool = True,
    outside: bool | None = None,
) -> bool:
    """Whether the script would let `user_id` decide the call, asking `facts` only what can
    change that. `outside`: already known (a grant records it); None: asked last."""
    known = bool(outside)
    if refusal(who, user_id, who.groups, approving=approving, outside=known) is not None:
        return False  # in every group, present and inside, they still could not
    member_of = await groups_of(who, user_id, facts, approving=approving, outside=known)
    if refusal(who, user_id, member_of, approving=approving, outside=known) is not None:
        return False
    if who.anyone and not await facts.present():
        return False
    if outside is None:
        outside = await facts.outside()
    return refusal(who, user_id, member_of, approving=approving, outside=outside) is None
