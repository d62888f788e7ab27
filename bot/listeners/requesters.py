"""Who may start a run: by default only full members of the installing workspace (or of its
Enterprise Grid organisation), told apart from guests and people of another organisation as
for deciders (`bot.slack.members`).

Every way to start a run asks here before anything is queued: `/agent` (in a channel or a
direct message), a mention of the app, a reply in a run's thread. With `EXTERNAL_REQUESTERS=deny`
(the default) an outsider is told why, privately and in one sentence, and nothing starts; with
`allow` their run starts and its `Conversation.requester_external` says so, so that no grant,
**Approve always** or automatic approval covers its calls. When Slack cannot say who someone is,
nothing starts and they are asked to try again: never guessed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot.slack.members import StandingUnknown, WorkspaceMembers
from bot.words import members as words

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Admission:
    """May this person start a run, and as whom."""

    refusal: str | None = None
    """What to tell them when they may not (None: they may)."""
    external: bool = False
    """They are a guest or of another organisation (only with `EXTERNAL_REQUESTERS=allow`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Requesters:
    members: WorkspaceMembers
    outsiders_allowed: bool = False
    """`EXTERNAL_REQUESTERS=allow`."""

    async def admit(self, user_id: str, how: str) -> Admission:
        """Whether `user_id` may start a run; `how` (`/agent`, a mention, a reply) is logged.
        Raises RedisError when the cache of people's standing cannot be read."""
        try:
            standing = await self.members.standing(user_id)
        except StandingUnknown:
            log.warning("%s by %s not started: workspace membership unknown", how, user_id)
            return Admission(refusal=words.REQUESTER_UNKNOWN)
        if standing.inside:
            return Admission()
        if not self.outsiders_allowed:
            log.info(
                "%s by %s (team %s) not started: outside the workspace (EXTERNAL_REQUESTERS=deny)",
                how,
                user_id,
                standing.team,
            )
            return Admission(refusal=words.OUTSIDE_REQUESTER)
        return Admission(external=True)
