"""Who is inside the workspace: by default only full members of the installing workspace (or, on
Enterprise Grid, of its enterprise) may decide, grant, stop or revoke. Slack Connect users of
another organisation and guests may too only where the policy says so (`EXTERNAL_DECIDERS=allow`,
a rule's `external = true`).

The installation's team and enterprise come from `auth.test`, asked once per process: as the
web process starts (its token's check, `bot.slack.bot_token`), or at the first click if Slack
did not answer then (concurrent clicks share that one request). A person's standing comes from
`users.info`: their `team_id`, their enterprise (`enterprise_user.enterprise_id`), and whether
Slack calls them a guest (`is_restricted`, `is_ultra_restricted`) or a stranger (`is_stranger`,
a user of another organisation). It is cached in Redis for `STANDING_TTL_SECONDS` (and, that
long, in the memory of the process that asked: `bot.slack.memo`), so a click costs one Redis
read at most, and Slack one `users.info` per person in that time (Tier 4: far below its
limit). A guest made a member (or the reverse) is seen within that time.

A payload that names the person's team (`user.team_id`) as another workspace's, outside
Enterprise Grid, is refused without asking Slack. When Slack cannot say (an error, no answer in
time), `StandingUnknown` is raised and the person is refused and asked to try again: never
guessed.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from aiohttp import ClientError
from pydantic import BaseModel, ConfigDict, ValidationError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.memo import Memo
from runtime.db import Keys

log = logging.getLogger(__name__)

STANDING_TTL_SECONDS = 300


class StandingUnknown(Exception):
    """Slack could not tell whether a person is a member of the installing workspace."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Installation:
    """The workspace (and enterprise, on Enterprise Grid) the app is installed in."""

    team_id: str
    enterprise_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Standing:
    """Whether a person is a full member of the installing workspace or its enterprise."""

    user_id: str
    inside: bool
    team: str | None
    """Their Slack team, for the audit trail (None: Slack does not know them)."""


class _Person(BaseModel):
    """What `users.info` says of a person that matters here, as cached."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    team_id: str | None = None
    enterprise_id: str | None = None
    guest: bool = False
    stranger: bool = False
    deleted: bool = False

    @classmethod
    def of(cls, user: dict[str, Any]) -> _Person:
        enterprise = user.get("enterprise_user") or {}
        return cls(
            team_id=user.get("team_id"),
            enterprise_id=enterprise.get("enterprise_id") if isinstance(enterprise, dict) else None,
            guest=bool(user.get("is_restricted") or user.get("is_ultra_restricted")),
            stranger=bool(user.get("is_stranger")),
            deleted=bool(user.get("deleted")),
        )

    def inside(self, home: Installation) -> bool:
        if self.guest or self.stranger or self.deleted:
            return False
        if home.enterprise_id is not None and self.enterprise_id == home.enterprise_id:
            return True  # any workspace of the same Enterprise Grid organisation
        return self.team_id == home.team_id


class WorkspaceMembers:
    def __init__(
        self,
        redis: aioredis.Redis,
        keys: Keys,
        client: AsyncWebClient,
        *,
        lookup_seconds: float | None = None,
    ) -> None:
        """`lookup_seconds` bounds each question to Slack (None: the client's own timeout)."""
        self._redis = redis
        self._keys = keys
        self._client = client
        self._lookup_seconds = lookup_seconds
        self._home: Installation | None = None
        self._asking_home = asyncio.Lock()
        self._asked: Memo[_Person] = Memo(STANDING_TTL_SECONDS)
        """People this process asked Slack about, for as long as it caches the answers."""

    async def installation(self) -> Installation:
        """The installing workspace, from `auth.test` once per process."""
        if self._home is not None:
            return self._home
        async with self._asking_home:
            if self._home is None:
                self._home = _installation(
                    await self._ask_slack("auth.test", self._client.auth_test())
                )
            return self._home

    def learn(self, answer: Any) -> None:
        """The installation from an answer of `auth.test` asked elsewhere (the web process's
        token check at start, `bot.slack.bot_token`); StandingUnknown if it names no team."""
        self._home = _installation(answer)

    async def standing(self, user_id: str, *, claimed_team: str | None = None) -> Standing:
        """Whether `user_id` is a full member here; `claimed_team` is the team the signed
        payload names for them (`user.team_id`), if it names one."""
        home = await self.installation()
        if home.enterprise_id is None and claimed_team and claimed_team != home.team_id:
            return Standing(user_id=user_id, inside=False, team=claimed_team)
        person = await self._person(user_id)
        if person is None:
            return Standing(user_id=user_id, inside=False, team=claimed_team)
        return Standing(
            user_id=user_id, inside=person.inside(home), team=person.team_id or claimed_team
        )

    async def _person(self, user_id: str) -> _Person | None:
        """The person as Slack describes them (cached); None when Slack knows no such user."""
        asked = self._asked.get(user_id)
        if asked is not None:
            return asked
        key = self._keys.slack.person(user_id)
        cached: Any = await self._redis.get(key)
        if cached is not None:
            try:
                return _Person.model_validate_json(cached)
            except ValidationError:
                pass  # written by another version: ask again
        try:
            response = await self._ask_slack("users.info", self._client.users_info(user=user_id))
        except _NoSuchUser:
            return None
        user = response.get("user")
        if not isinstance(user, dict):
            raise StandingUnknown("users.info named no user")
        person = _Person.of(user)
        await self._redis.set(key, person.model_dump_json(), ex=STANDING_TTL_SECONDS)
        self._asked.put(user_id, person)
        return person

    async def _ask_slack(self, method: str, call: Any) -> Any:
        try:
            async with asyncio.timeout(self._lookup_seconds):
                return await call
        except SlackApiError as error:
            reason = error.response.get("error")
            if reason == "user_not_found":
                raise _NoSuchUser(method) from error
            log.warning("%s refused (%s): members of the workspace unknown", method, reason)
            raise StandingUnknown(method) from error
        except (ClientError, TimeoutError) as error:
            log.warning("%s unavailable: %s", method, type(error).__name__)
            raise StandingUnknown(method) from error


class _NoSuchUser(StandingUnknown):
    """Slack knows no such user here (`user_not_found`): not a member."""


def _installation(answer: Any) -> Installation:
    team = answer.get("team_id")
    if not isinstance(team, str) or not team:
        raise StandingUnknown("auth.test named no team")
    grid = answer.get("enterprise_id")
    return Installation(
        team_id=team, enterprise_id=grid if isinstance(grid, str) and grid else None
    )
