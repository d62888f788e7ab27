"""The bot token, checked when a process starts and by `/readyz`, never inside a request.

Left to itself Bolt asks `auth.test` on the first request, inside Slack's 3 s: with Slack
unreachable, a signed slash command got a 500 after 5.8 s. Here each process asks once at
start, in the background (it serves at once), and again with the shared backoff (up to
`MAX_RETRY_SECONDS`) while Slack does not answer; `/readyz` asks again when the last answer is
older than `READY_CACHE_SECONDS`. When Slack refuses the token (`REFUSED`), one line says so,
naming `SLACK_BOT_TOKEN` and the fix, and readiness fails until Slack accepts it again; the
worker holds its runs meanwhile (`runtime.process.credentials`). Bolt's `authorize` answers
from what is known, with no call: the token, and the bot's ids once the check has them. The
same answer gives the thread links their workspace URL (`bot.slack.links`) and the membership
checks their installation (`bot.slack.members`), so neither asks again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

from aiohttp import ClientError
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.links import ThreadLinks
from bot.slack.members import StandingUnknown, WorkspaceMembers
from runtime.db import FIRST_RETRY_SECONDS, MAX_RETRY_SECONDS
from runtime.process import Backoff, Shutdown

log = logging.getLogger(__name__)

CHECK_TIMEOUT_SECONDS = 10.0
READY_TIMEOUT_SECONDS = 2.0
"""What a `/readyz` may wait for Slack's answer; past it, the last answer stands."""
READY_CACHE_SECONDS = 60.0
"""`/readyz` asks Slack again only when its last answer is older than this."""
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
SETTING = "SLACK_BOT_TOKEN"


class BotToken:
    name = "Slack token check"

    def __init__(
        self,
        client: AsyncWebClient,
        *,
        links: ThreadLinks,
        members: WorkspaceMembers | None,
        fix: str,
        recheck_seconds: float = READY_CACHE_SECONDS,
    ) -> None:
        """`client` carries the token; `links` and `members` (the web's) learn the workspace
        from the one answer; `fix` tells the operator how to get a good token;
        `recheck_seconds`: how often held work asks whether a refused token is accepted."""
        self._client = client
        self._links = links
        self._members = members
        self._fix = fix
        self._recheck_seconds = recheck_seconds
        self._identity: dict[str, Any] = {}
        self._answered_at: float | None = None
        self._asking = asyncio.Lock()
        self._stopping = Shutdown()
        self._told_team = False
        self.refused_reason: str | None = None
        """Slack's error when it refused the token; None while unknown or good."""

    @property
    def refused(self) -> bool:
        return self.refused_reason is not None

    async def check(self, stopping: Shutdown, *, first_delay: float = FIRST_RETRY_SECONDS) -> None:
        """Ask `auth.test` until Slack answers (or `stopping`); say so if it refuses."""
        backoff = Backoff(first_delay, MAX_RETRY_SECONDS)
        while not stopping.is_set():
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
                    # A shutdown does not wait for Slack's answer.
                    answered = await stopping.unless_stopped(self._ask())
                if answered is None:
                    return
            except (ClientError, TimeoutError, OSError) as error:
                log.warning(
                    "cannot reach Slack to check %s (%s); retrying in %g s",
                    SETTING,
                    type(error).__name__,
                    backoff.delay,
                )
            except SlackApiError as error:
                log.warning(
                    "Slack answers auth.test with %s; retrying in %g s",
                    error.response.get("error"),
                    backoff.delay,
                )
            else:
                return
            if await stopping.sleep(backoff.failed()):
                return

    async def run(self) -> None:
        """The worker's check at start, as one of its loops (`stop` ends it)."""
        await self.check(self._stopping)

    def stop(self) -> None:
        self._stopping.set()

    def refused_by(self, error: BaseException) -> bool:
        """Whether `error` is Slack refusing the token (then known from now on, said once)."""
        found: BaseException | None = error
        while found is not None and not isinstance(found, SlackApiError):
            found = found.__cause__ or found.__context__
        if found is None:
            return False
        reason = str(found.response.get("error"))
        if reason not in REFUSED:
            return False
        self._refused(reason)
        return True

    async def until_accepted(self, stopping: Shutdown) -> bool:
        """While Slack refuses the token, ask again every `recheck_seconds` (one ask for every
        waiter); True once accepted, False if `stopping` came first."""
        while self.refused:
            if await stopping.sleep(self._recheck_seconds):
                return False
            with contextlib.suppress(ClientError, TimeoutError, OSError, SlackApiError):
                await self._ask_if_older(self._recheck_seconds, CHECK_TIMEOUT_SECONDS)
        return not stopping.is_set()

    async def readiness(self) -> dict[str, str]:
        """For `/readyz`: `{"SLACK_BOT_TOKEN": what to fix}` while Slack refuses it, else empty.
        Slack is asked when its last answer is older than `READY_CACHE_SECONDS`; unreachable,
        the last answer stands (Slack away is not the token's fault)."""
        with contextlib.suppress(ClientError, TimeoutError, OSError, SlackApiError):
            await self._ask_if_older(READY_CACHE_SECONDS, READY_TIMEOUT_SECONDS)
        if self.refused_reason is None:
            return {}
        return {SETTING: self._refusal_line(self.refused_reason)}

    async def authorize(
        self, enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult | None:
        """Bolt's `authorize`, with no call: None (Bolt then answers "not installed") while
        Slack refuses the token."""
        if self.refused:
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

    async def _ask_if_older(self, seconds: float, wait_seconds: float) -> None:
        async with self._asking:  # one question at a time; the others take its answer
            answered = self._answered_at
            if answered is not None and time.monotonic() - answered < seconds:
                return
            async with asyncio.timeout(wait_seconds):
                await self._ask()

    async def _ask(self) -> bool:
        """One `auth.test`: True if Slack accepts the token, False if it refuses it; raises
        when Slack does not answer, or answers another error."""
        try:
            response = await self._client.auth_test()
        except SlackApiError as error:
            reason = str(error.response.get("error"))
            if reason not in REFUSED:
                raise
            self._answered_at = time.monotonic()
            self._refused(reason)
            return False
        self._answered_at = time.monotonic()
        self._identity = dict(response.data) if isinstance(response.data, dict) else {}
        self._links.learn(self._identity.get("url"))
        if self._members is not None:
            with contextlib.suppress(StandingUnknown):  # a click asks again, and says so
                self._members.learn(self._identity)
        if self.refused_reason is not None:
            log.info("Slack accepts %s again: what waited goes on", SETTING)
        elif not self._told_team:
            log.info("Slack: %s is the bot of team %s", SETTING, self._identity.get("team"))
        self._told_team = True
        self.refused_reason = None
        return True

    def _refused(self, reason: str) -> None:
        if self.refused_reason is None:  # said once, until Slack accepts the token again
            log.error("%s", self._refusal_line(reason))
        self.refused_reason = reason

    def _refusal_line(self, reason: str) -> str:
        return f"Slack refuses {SETTING} ({reason}). {self._fix}"
