"""Links to a run's thread, for lists that live outside it (`/agent status`, the Home tab).

Slack's permalink is the workspace URL (from `auth.test`, asked once per process) plus the
channel and the message ts; building it here costs no call per message. The web process learns
the URL when it checks its token at start (`bot.slack.bot_token`); until then the first list
asks, and every list drawn meanwhile waits for that one answer instead of asking again.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger(__name__)

# A list must answer within Slack's 3 s: without the workspace URL it goes out without links.
AUTH_TIMEOUT_SECONDS = 1.0


class ThreadLinks:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client
        self._workspace_url: str | None = None
        self._asking: asyncio.Task[str | None] | None = None

    def learn(self, url: object) -> None:
        """The workspace URL of an `auth.test` asked elsewhere; ignored unless it is one."""
        if isinstance(url, str) and url.startswith("https://"):
            self._workspace_url = url if url.endswith("/") else url + "/"

    async def thread(self, channel: str, ts: str | None) -> str | None:
        """`https://<workspace>.slack.com/archives/<channel>/p<ts>`, or None if unknown."""
        if ts is None:
            return None
        base = await self._base()
        if base is None:
            return None
        return f"{base}archives/{channel}/p{ts.replace('.', '')}"

    async def _base(self) -> str | None:
        if self._workspace_url is not None:
            return self._workspace_url
        if self._asking is None or self._asking.done():
            self._asking = asyncio.get_running_loop().create_task(self._ask(), name="auth.test")
        # Shielded: a caller that gives up does not cancel the answer the others wait for.
        return await asyncio.shield(self._asking)

    async def _ask(self) -> str | None:
        try:
            async with asyncio.timeout(AUTH_TIMEOUT_SECONDS):
                response = await self._client.auth_test()
        except (SlackApiError, ClientError, TimeoutError) as error:
            log.warning("workspace URL unknown (%s); lists go without links", error)
            return None
        self.learn(response.get("url"))
        return self._workspace_url
