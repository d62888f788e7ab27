"""The bot token, checked once when the web process starts, never inside a request.

Left to itself Bolt asks `auth.test` on the first request, inside Slack's 3 s: with Slack
unreachable, a signed slash command got a 500 after 5.8 s. Here the web process asks once at
start, in the background (it serves at once), and again with a backoff doubling to
`MAX_RETRY_SECONDS` while Slack does not answer; when Slack refuses the token, one line says so,
naming `SLACK_BOT_TOKEN` and the fix. Bolt's `authorize` answers from what is known, with no
call: the token, and the bot's ids once the check has them. The same answer gives the thread
links their workspace URL (`bot.slack.links`) and the membership checks their installation
(`bot.slack.members`), so neither asks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import ClientError
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.links import ThreadLinks
from bot.slack.members import StandingUnknown, WorkspaceMembers
from runtime.db import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS
from runtime.process import Shutdown

log = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 10.0
REFUSED = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "not_allowed_token_type",
    }
)
"""`auth.test`'s errors that mean the token itself is wrong: asking again cannot help."""


class BotToken:
    def __init__(
        self, client: AsyncWebClient, *, links: ThreadLinks, members: WorkspaceMembers, fix: str
    ) -> None:
        """`client` carries the token; `links` and `members` learn the workspace from the one
        answer; `fix` tells the operator how to get a good token."""
        self._client = client
        self._links = links
        self._members = members
        self._fix = fix
        self._identity: dict[str, Any] = {}
        self.refused: str | None = None
        """Slack's error when it refused the token; None while unknown or good."""

    async def check(self, stopping: Shutdown, *, first_delay: float = FIRST_RETRY_SECONDS) -> None:
        """Ask `auth.test` until Slack answers (or `stopping`); say so if it refuses."""
        delay = first_delay
        while not stopping.is_set():
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                    # A shutdown does not wait for Slack's answer.
                    response = await stopping.unless_stopped(self._client.auth_test())
                if response is None:
                    return
            except SlackApiError as error:
                reason = str(error.response.get("error"))
                if reason in REFUSED:
                    self.refused = reason
                    log.error("Slack refuses SLACK_BOT_TOKEN (%s). %s", reason, self._fix)
                    return
                log.warning("Slack answers auth.test with %s; retrying in %g s", reason, delay)
            except (ClientError, TimeoutError, OSError) as error:
                log.warning(
                    "cannot reach Slack to check SLACK_BOT_TOKEN (%s); retrying in %g s",
                    type(error).__name__,
                    delay,
                )
            else:
                self._identity = dict(response.data) if isinstance(response.data, dict) else {}
                self._links.learn(self._identity.get("url"))
                with contextlib.suppress(StandingUnknown):  # a click asks again, and says so
                    self._members.learn(self._identity)
                log.info("Slack: SLACK_BOT_TOKEN is the bot of team %s", self._identity.get("team"))
                return
            if await stopping.sleep(delay):
                return
            delay = min(delay * 2, MAX_RETRY_SECONDS)

    async def authorize(
        self, enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult | None:
        """Bolt's `authorize`, with no call: None (Bolt then answers "not installed") once Slack
        refused the token."""
        if self.refused is not None:
            return None
        known = self._identity
        return AuthorizeResult(
            enterprise_id=enterprise_id or known.get("enterprise_id"),
            team_id=team_id or known.get("team_id"),
            user_id=user_id,
            bot_token=self._client.token,
            bot_id=known.get("bot_id"),
            bot_user_id=known.get("user_id"),
        )
