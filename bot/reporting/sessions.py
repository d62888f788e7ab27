"""A run's thread as a Slack agent session: `processing` while the agent works (Slack shows its
own **Stop** then, whose `agent_session_stopped` goes through `bot.listeners.stops`), `suspended`
while a call waits for a person, `closed` once the run ended; its title is the task.

A courtesy beside the status message, never instead of it: the status message (with our own
**Stop**) is drawn as before, so no step is lost whatever Slack answers. Slack's errors are of
two kinds (`refused`):
- the workspace or the app cannot (`missing_scope`, `not_allowed`, `method_not_supported`, a
  feature not enabled, a token Slack does not take: `APP_ERRORS`): sessions and streams are off
  for this process, said once in the log with the scope (`assistant:write`) or the setting
  (`STREAMING`) to look at;
- anything else (`ratelimited` past the client's retries, an internal error, Slack out of
  reach): only that run falls back to its status message and our Stop, said once in the log
  for the run; the next run tries again.
`STREAMING=off` keeps them off.

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
"""Runs whose shown status is remembered (oldest forgotten first: they only get a call more),
and runs fallen back to their status message (oldest forgotten first: a stretch of theirs
tries again)."""
APP_ERRORS = frozenset(
    {
        "missing_scope",
        "not_allowed",
        "method_not_supported",
        "unknown_method",
        "not_enabled",
        "feature_not_enabled",
        "team_not_allowed",
        "no_permission",
        "access_denied",
        "not_allowed_token_type",
        "invalid_auth",
        "not_authed",
    }
)
"""Answers that say the workspace or the app cannot use sessions or streams: off for the
process. Any other answer is one run's (`refused`)."""


class AgentSessions:
    def __init__(self, client: AsyncWebClient, *, enabled: bool = True) -> None:
        self._client = client
        self.off_because: str | None = None if enabled else "STREAMING=off"
        """Why sessions are not used (None: they are)."""
        self._shown: OrderedDict[str, str] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self._fallen: OrderedDict[str, str] = OrderedDict()
        """Run id -> why that run fell back to its status message."""

    @property
    def on(self) -> bool:
        return self.off_because is None

    def on_for(self, run: RunView) -> bool:
        """Whether the run's thread is a session and streams: on for the process, the run not
        fallen back, and a thread to stream in."""
        return self.on and run.run_id not in self._fallen and run.conversation.thread is not None

    async def begin(self, run: RunView) -> None:
        """The run's thread starts: the session takes the task as its title and `processing`."""
        if not self.on_for(run):
            return
        await self.show(run, "working")
        title = run.task if len(run.task) <= TITLE_LIMIT else run.task[: TITLE_LIMIT - 1] + "…"
        if self.on_for(run):
            await self._call(
                run,
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
        if not self.on_for(run) or status is None:
            return
        # One call at a time per run, in the order asked: a `processing` sent as a stretch
        # begins (`RunRound.advance` does not wait for it) never lands after its `suspended`.
        lock = self._locks.setdefault(run.run_id, asyncio.Lock())
        async with lock:
            if not self.on_for(run) or (not again and self._shown.get(run.run_id) == status):
                return
            shown = await self._call(
                run,
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

    async def _call(self, run: RunView, method: str, call: Awaitable[object]) -> bool:
        try:
            await call
        except SlackApiError as error:
            self.refused(run, method, error)
            return False
        except (ClientError, TimeoutError) as error:
            self.refused(run, method, None, reason=type(error).__name__)
            return False
        return True

    def refused(
        self, run: RunView, method: str, error: SlackApiError | None, *, reason: str = ""
    ) -> None:
        """Slack answered `error` to `method` for `run` (or the call failed for `reason`):
        sessions and streams are off for the process when the answer says the workspace or
        the app cannot (`APP_ERRORS`), else for this run only; either said once in the log."""
        answer = error.response if error is not None else None
        code = str(answer.get("error")) if answer is not None else reason
        if code in APP_ERRORS:
            self._turn_off(method, code, answer.get("needed") if answer is not None else None)
            return
        if not self.on or run.run_id in self._fallen:
            return
        self._fallen[run.run_id] = f"{method}: {code}"
        while len(self._fallen) > REMEMBERED:
            self._fallen.popitem(last=False)
        log.warning(
            "run %s: agent session and streaming off for this run: Slack answered %s to %s; it "
            "shows its status message and Stop button, and the next run tries again",
            run.run_id,
            code,
            method,
        )

    def _turn_off(self, method: str, code: str, needed: object) -> None:
        if not self.on:
            return
        self.off_because = f"{method}: {code}"
        if code == "missing_scope":
            scope = needed or "assistant:write"
            hint = f"add the {scope} scope to the Slack app and reinstall it"
        else:
            hint = "set STREAMING=off to say so and keep this line out of the log"
        log.warning(
            "agent sessions and streaming off for this process: Slack answered %s to %s; runs "
            "show their status message and Stop button only (%s)",
            code,
            method,
            hint,
        )
