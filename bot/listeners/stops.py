"""Stopping a run: the **Stop** button on its status message, `/agent stop <run id>`, and
Slack's own Stop on the run's thread while its agent session is `processing`
(`agent_session_stopped`): one path, one check of who may, one audit entry.

Who may stop is enforced by the stop script; the web process only looks up which of the groups
involved (the open calls' approver groups and the `ADMINS` groups) the person is in, and refuses
a person outside the installing workspace (`bot.slack.members`) unless `EXTERNAL_DECIDERS` is
`allow` or every call of the run's round lets such people decide (`external`). A run that
waits for people is stopped here and now, so its cards, status message and thread are redrawn
from here; a working run is stopped by its worker at its next safe point.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.reporting.reporter import SlackReporter
from bot.slack.client import send_later
from bot.slack.directory import ApproverDirectory, DirectoryUnavailable
from bot.slack.events import SessionStopped
from bot.slack.members import Standing, StandingUnknown, WorkspaceMembers
from bot.slack.payloads import ButtonClick
from bot.words import members as member_messages
from bot.words import runs as messages
from runtime.conversations import ThreadHistory
from runtime.db import NotReplicated
from runtime.deciders import first_member_of, outsider_may_stop, stop_groups_to_ask
from runtime.jobs import RUN_ID_PATTERN
from runtime.metrics import DECISIONS
from runtime.process import TaskSet
from runtime.record import Decision
from runtime.reporter import Activity, RunView
from runtime.stops import Principals, RunStopper, StopResult, StopView

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class StopActions:
    stopper: RunStopper
    directory: ApproverDirectory
    reporter: SlackReporter
    client: AsyncWebClient
    tasks: TaskSet
    admins: Principals
    members: WorkspaceMembers
    outsiders_allowed: bool = False
    """`EXTERNAL_DECIDERS=allow`."""
    history: ThreadHistory | None = None
    """Which run a thread is (Slack's Stop names the thread, not the run); None: Slack's Stop
    is not answered."""

    async def on_stop_button(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = ButtonClick.model_validate(body)
        except ValidationError:
            log.warning("stop click with an invalid payload refused")
            return
        text = await self.stop(
            click.action.value,
            click.user.id,
            click.user.display,
            where=click.channel.id,
            claimed_team=click.user.team_id,
        )
        if text is not None:
            send_later(
                self.tasks,
                self.client.chat_postEphemeral(
                    channel=click.channel.id, user=click.user.id, text=text
                ),
                "stop-note",
            )

    async def on_session_stopped(self, event: SessionStopped) -> None:
        """Slack's Stop, pressed by `event.user`: the run of the thread stops as with our own
        Stop. Someone who may not stop it is told privately, and the session shows the run's
        status again (Slack took it out of `processing`)."""
        last = None
        if self.history is not None:
            try:
                last = await self.history.last_run(event.channel, event.thread_ts)
            except RedisError:
                log.warning("Slack's Stop in %s not answered: Redis unreachable", event.channel)
        if last is None:
            log.info("Slack's Stop on a thread that is no run's (%s)", event.thread_ts)
            return
        text = await self.stop(last.run_id, event.user, None, where=event.channel)
        if text is None or text == messages.STOPPING:
            return  # stopped: the thread says so and the session is closed with its status
        send_later(
            self.tasks,
            self.client.chat_postEphemeral(
                channel=event.channel, user=event.user, thread_ts=event.thread_ts, text=text
            ),
            "stop-note",
        )
        send_later(self.tasks, self._session_back(last.run_id), f"session:{last.run_id}")

    async def _session_back(self, run_id: str) -> None:
        """The session shows the run's status again, after a Stop that did not stop it."""
        view = await self.stopper.view(run_id)
        if view.envelope is None:
            return
        state = "waiting" if view.status == "waiting" else "working"
        await self.reporter.sessions.show(RunView.of(view.envelope), state, again=True)

    async def stop(
        self,
        run_id: str,
        user_id: str,
        user_name: str | None,
        *,
        where: str,
        claimed_team: str | None = None,
    ) -> str | None:
        """Stop `run_id` for `user_id`, asked from `where` (a channel, or `run_record.HOME_TAB`);
        what to tell them privately (None: the thread says it). `claimed_team`: the person's
        team as the signed payload names it, if it does."""
        if not re.match(RUN_ID_PATTERN, run_id):
            return messages.STOP_UNKNOWN_RUN
        try:
            view = await self.stopper.view(run_id)
            if not view.exists:
                return messages.STOP_UNKNOWN_RUN
            standing = await self.members.standing(user_id, claimed_team=claimed_team)
            if not self._may_act(standing, view):
                log.info("run %s: stop by %s refused: outside the workspace", run_id, user_id)
                return member_messages.OUTSIDE_WORKSPACE
            result = await self._stop(view, standing, user_name, where)
        except RedisError as error:
            return (
                messages.STOP_NOT_CONFIRMED
                if isinstance(error, NotReplicated)
                else messages.TRY_AGAIN
            )
        except DirectoryUnavailable:
            return messages.DIRECTORY_UNAVAILABLE
        except StandingUnknown:
            return member_messages.STANDING_UNKNOWN
        log.info("run %s: stop by %s: %s", run_id, user_id, result.status)
        return await self._told(view, result)

    async def _told(self, view: StopView, result: StopResult) -> str | None:
        """What the stop's outcome tells the person (None: the thread says it)."""
        run_id = view.run_id
        if result.status in ("stopped", "stopping"):
            DECISIONS.labels("stopped").inc()
        if result.status == "stopped":
            send_later(self.tasks, self._show_stopped(view, result), f"stopped:{run_id}")
            return None
        if result.status == "stopping":
            return messages.STOPPING
        if result.status == "already" and result.mark is not None:
            return messages.stop_already(result.mark.user_id)
        if result.status == "not_allowed":
            return await self._who_may_stop(view)
        return messages.STOP_CLOSED

    async def _stop(
        self, view: StopView, standing: Standing, user_name: str | None, where: str
    ) -> StopResult:
        user_id = standing.user_id
        return await self.stopper.stop(
            view,
            user_id=user_id,
            user_name=user_name,
            member_of=await self._groups_of(user_id, view, where),
            admins=self.admins,
            where=where,
            team=standing.team,
        )

    def _may_act(self, standing: Standing, view: StopView) -> bool:
        """A member may; someone outside the workspace only where the policy lets such people
        decide every call of the round (stopping decides them all)."""
        calls = list(view.gates.values())
        return standing.inside or outsider_may_stop(calls, outsiders_allowed=self.outsiders_allowed)

    async def _groups_of(self, user_id: str, view: StopView, where: str) -> tuple[str, ...]:
        """The groups involved that `user_id` is in; none needed when listed by id (or when a
        call anyone may decide is in `where`)."""
        calls = [(gate, view.in_channel(aid, where)) for aid, gate in view.gates.items()]
        groups = stop_groups_to_ask(
            user_id, requester=view.requester, admins=self.admins, calls=calls
        )
        return await first_member_of(user_id, groups, self.directory)

    async def _who_may_stop(self, view: StopView) -> str:
        principals = [view.requester] if view.requester else []
        for gate in view.gates.values():
            principals += [*gate.users, *gate.groups]
        principals += [*self.admins.users, *self.admins.groups]
        unique = list(dict.fromkeys(principals))
        names = await self.directory.names(unique)
        channels = dict.fromkeys(g.channel for g in view.gates.values() if g.anyone)
        return messages.stop_not_allowed([names[p] for p in unique], list(channels))

    async def _show_stopped(self, view: StopView, result: StopResult) -> None:
        """A waiting run stopped here: its cards, status message and thread say so."""
        if view.envelope is None or result.mark is None:
            log.warning("run %s: stopped, but this version cannot redraw it", view.run_id)
            return
        run = RunView.of(view.envelope)
        mark = result.mark
        decision = Decision(
            outcome="stopped",
            user_id=mark.user_id,
            user_name=mark.user_name,
            reason=None,
            decided_at=mark.at,
        )
        for call in view.open_calls(result.stopped_calls):
            if call.message_ts is not None:
                await self._quietly(
                    self.reporter.redraw(run, call.model_copy(update={"decision": decision}))
                )
        if view.status_message:
            activity = Activity(steps=view.status_steps, state="stopped")
            await self.reporter.progress(run, view.status_message, activity)
        await self._quietly(self.reporter.run_stopped(run, mark.user_id))

    async def _quietly(self, work: Coroutine[Any, Any, Any]) -> None:
        try:
            await work
        except SlackApiError as error:
            log.warning("stop: Slack refused: %s", error.response.get("error"))
