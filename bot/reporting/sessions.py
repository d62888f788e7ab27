"""A run's thread as a Slack agent session: `processing` while the agent works (Slack shows its
own **Stop** then, whose `agent_session_stopped` goes through `bot.listeners.stops`), `suspended`
while a call waits for a person, `closed` once the run ended; its title is the task.

A courtesy beside the status message, never instead of it: the status message (with our own
**Stop**) is drawn as before, so no step is lost whatever Slack answers. A workspace or app
without sessions answers an error (`not_allowed`, `method_not_supported`, `missing_scope`,
`ratelimited` past the client's retries, or another): sessions are then off for this process,
said once in the log with the scope or the setting to look at. `STREAMING=off` keeps them off.

Nothing is stored: the session is the thread's (channel and thread ts), and the status shown is
remembered in memory only to spare Slack a call that changes nothing. A worker that took a run
over sends its status again at its first step.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from runtime.reporter import RunView

log = logging.getLogger(__name__)

SESSION_STATUSES = {
    "working": "processing",
    "waiting": "suspended",
    "done": "closed",
    "failed": "closed",
    "stopped": "closed",
}
"""A run's state (`runtime.reporter.Activity.state`) as a session's status."""
TITLE_LIMIT = 255
REMEMBERED = 4096
"""Runs whose shown status is remembered (oldest forgotten first: they only get a call more)."""


class AgentSessions:
    def __init__(self, client: AsyncWebClient, *, enabled: bool = True) -> None:
        self._client = client
        self.off_because: str | None = None if enabled else "STREAMING=off"
        """Why sessions are not used (None: they are)."""
        self._shown: OrderedDict[str, str] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def on(self) -> bool:
        return self.off_because is None

    async def begin(self, run: RunView) -> None:
        """The run's thread starts: the session takes the task as its title and `processing`."""
        if not self.on or run.conversation.thread is None:
            return
        await self.show(run, "working")
        title = run.task if len(run.task) <= TITLE_LIMIT else run.task[: TITLE_LIMIT - 1] + "…"
        if self.on:
            await self._call(
                "agents.sessions.rename",
                self._client.agents_sessions_rename(
                    channel_id=run.conversation.channel,
                    thread_ts=run.conversation.thread,
                    title=title,
                ),
            )

    async def show(self, run: RunView, state: str, *, again: bool = False) -> None:
        """Set the session's status for the run's `state` (a change only, unless `again`:
        Slack's Stop was pressed by someone who may not stop, and the status goes back)."""
        status = SESSION_STATUSES.get(state)
        if not self.on or status is None or run.conversation.thread is None:
            return
        # One call at a time per run, in the order asked: a `processing` sent as a stretch
        # begins (`RunRound.advance` does not wait for it) never lands after its `suspended`.
        lock = self._locks.setdefault(run.run_id, asyncio.Lock())
        async with lock:
            if not self.on or (not again and self._shown.get(run.run_id) == status):
                return
            shown = await self._call(
                "agents.sessions.setStatus",
                self._client.agents_sessions_setStatus(
                    channel_id=run.conversation.channel,
                    thread_ts=run.conversation.thread,
                    status=status,
                    initiator_user_id=run.conversation.requester or None,
                ),
            )
            if shown:
                self._shown[run.run_id] = status
                self._shown.move_to_end(run.run_id)
        if not shown:
            self._shown.pop(run.run_id, None)
        # `closed` stays remembered (the run's ending tells it again: one call, not two); its
        # lock goes, and the oldest remembered go past REMEMBERED.
        if (status == "closed" or not shown) and not lock.locked():
            self._locks.pop(run.run_id, None)
        while len(self._shown) > REMEMBERED:
            self._locks.pop(self._shown.popitem(last=False)[0], None)

    async def _call(self, method: str, call: Awaitable[object]) -> bool:
        try:
            await call
        except SlackApiError as error:
            self.turn_off(method, error)
            return False
        except (ClientError, TimeoutError) as error:
            self.turn_off(method, None, reason=type(error).__name__)
            return False
        return True

    def turn_off(self, method: str, error: SlackApiError | None, *, reason: str = "") -> None:
        """Slack answered `error` (or the call failed for `reason`): sessions and streams are
        off for this process, said once in the log."""
        if not self.on:
            return
        answer = error.response if error is not None else None
        code = str(answer.get("error")) if answer is not None else reason
        self.off_because = f"{method}: {code}"
        if code == "missing_scope" and answer is not None:
            hint = f"add the {answer.get('needed')} scope to the Slack app and reinstall it"
        else:
            hint = "set STREAMING=off to say so and keep this line out of the log"
        log.warning(
            "agent sessions and streaming off for this process: Slack answered %s to %s; runs "
            "show their status message and Stop button only (%s)",
            code,
            method,
            hint,
        )
