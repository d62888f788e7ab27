"""Requests for another installation: the Bolt middleware every request passes, over HTTP and
Socket Mode alike, after the signature and before any listener.

One Slack app can be installed in several workspaces, and every installation's requests reach
the same URL, signed with the same secret. This process holds one workspace's token (or one
Enterprise Grid organisation's): a slash command of another workspace started a run and posted
its card with this workspace's token. So each request is checked against the installation
`auth.test` names (`bot.slack.members.WorkspaceMembers.installation`), by the fields Slack uses
to say which installation a request is for:

- events: `authorizations` (the installation the event is delivered to; the top-level
  `team_id` is the shared channel's host in Slack Connect), else `context_team_id` and
  `context_enterprise_id`, else `team_id` and `enterprise_id`;
- anything with a view (a modal's submission, a click in a modal or on the Home tab):
  `view.app_installed_team_id` (the payload's `team` is the person's own in Slack Connect:
  bolt-python's `connect_channel_payload`);
- slash commands: `team_id` and `enterprise_id`;
- other interactions (a click on a message): `team.id` (the team whose app posted the message)
  and `enterprise.id`, or `team.enterprise_id`.

A request is ours when it names our team, or our enterprise when we are part of one (any of its
workspaces, as for who may decide). One that names only others starts nothing and decides
nothing: a slash command is told so in one sentence, an event or a click is answered 200 so
that Slack does not send it again, and the log says so once per other team and process. Should
Slack not have said which installation this is (`auth.test` unanswered since start), a request
that names one is not served: a command is asked to try again, an event is answered 503 so that
Slack sends it again later.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.response import BoltResponse

from bot.slack.members import Installation, StandingUnknown, WorkspaceMembers
from bot.words import members as words

log = logging.getLogger(__name__)

REMEMBERED_TEAMS = 1000
"""Other teams already named in the log at WARNING (later requests of theirs at DEBUG)."""


@dataclass(frozen=True, slots=True)
class Addressee:
    """An installation a request names: its team, its enterprise (either may be unknown)."""

    team: str | None
    enterprise: str | None = None

    def is_ours(self, home: Installation) -> bool:
        if self.team is not None and self.team == home.team_id:
            return True
        if self.enterprise is not None and home.enterprise_id is not None:
            return self.enterprise == home.enterprise_id
        return self.team is None and self.enterprise is None


def addressed_to(body: dict[str, Any]) -> list[Addressee]:
    """The installations a (signed, well-shaped) request names; [] when it names none."""
    if body.get("type") == "event_callback":
        authorizations = body.get("authorizations")
        if isinstance(authorizations, list) and authorizations:
            return [
                Addressee(_id(a.get("team_id")), _id(a.get("enterprise_id")))
                for a in authorizations
                if isinstance(a, dict)
            ]
        context = Addressee(
            _id(body.get("context_team_id")), _id(body.get("context_enterprise_id"))
        )
        if context != Addressee(None):
            return [context]
        return [Addressee(_id(body.get("team_id")), _id(body.get("enterprise_id")))]
    view = body.get("view")
    if isinstance(view, dict) and _id(view.get("app_installed_team_id")):
        return [Addressee(_id(view.get("app_installed_team_id")))]
    if "command" in body:
        return [Addressee(_id(body.get("team_id")), _id(body.get("enterprise_id")))]
    team, enterprise = body.get("team"), body.get("enterprise")
    team_id = _id(team.get("id")) if isinstance(team, dict) else _id(team)
    enterprise_id = _id(enterprise.get("id")) if isinstance(enterprise, dict) else _id(enterprise)
    if enterprise_id is None and isinstance(team, dict):
        enterprise_id = _id(team.get("enterprise_id"))
    named = Addressee(team_id, enterprise_id)
    return [named] if named != Addressee(None) else []


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(kw_only=True)
class InstallationCheck:
    members: WorkspaceMembers
    _told: set[Addressee] = field(default_factory=set)

    def middleware(self) -> Callable[..., Awaitable[BoltResponse | None]]:
        """The function for `AsyncApp.use`: Bolt passes the arguments a function names."""

        async def installation_check(
            body: dict[str, Any], next: Callable[[], Awaitable[BoltResponse]]
        ) -> BoltResponse | None:
            refused = await self.refusal(body)
            return refused if refused is not None else await next()

        return installation_check

    async def refusal(self, body: dict[str, Any]) -> BoltResponse | None:
        """The answer to a request for another installation; None for one of ours."""
        named = addressed_to(body)
        if not named:
            return None
        try:
            home = await self.members.installation()
        except StandingUnknown:
            log.warning("request not served: which workspace this is is unknown (auth.test)")
            if "command" in body:
                return _said(words.INSTALLATION_UNKNOWN)
            return BoltResponse(status=503 if body.get("type") == "event_callback" else 200)
        if any(addressee.is_ours(home) for addressee in named):
            return None
        self._log(named, body)
        if "command" in body:
            return _said(words.OTHER_WORKSPACE)
        return BoltResponse(status=200, body="")

    def _log(self, named: list[Addressee], body: dict[str, Any]) -> None:
        first = named[0]
        what = body.get("command") or body.get("type") or "request"
        event = body.get("event")
        if isinstance(event, dict) and isinstance(event.get("type"), str):
            what = f"{what} {event['type']}"
        if first in self._told:
            log.debug("%s for team %s ignored: not this installation", what, first.team)
            return
        if len(self._told) < REMEMBERED_TEAMS:
            self._told.add(first)
        log.warning(
            "%s for team %s (enterprise %s) ignored: this process serves another installation; "
            "later requests of that team are logged at DEBUG",
            what,
            first.team,
            first.enterprise,
        )


def _said(text: str) -> BoltResponse:
    """What only the person who typed the command sees."""
    body = json.dumps({"response_type": "ephemeral", "text": text})
    return BoltResponse(status=200, body=body, headers={"content-type": "application/json"})
