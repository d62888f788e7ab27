"""The Home tab's events and buttons: opening it, Approve, Approve always, Reject and Stop.

A decision made here goes through the same checks and the same decision script as one made on
the card, from `run_record.HOME_TAB` instead of a channel; the card and each of its copies are
redrawn, and the tab republished. A Home tab has no channel for private notes, so what the
clicker must be told comes as a direct message from the app.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import ClientError
from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot import messages
from bot.approval_actions import NOT_RECORDED, REFUSED
from bot.approval_blocks import reject_modal
from bot.approval_gate import ApprovalGate
from bot.approvers import DirectoryUnavailable
from bot.home_blocks import ACTION_HOME_APPROVE_ALWAYS
from bot.home_tab import HomeTab
from bot.payloads import ApprovalRef, HomeClick, RejectMetadata
from bot.slack_reporter import SlackReporter
from bot.stop_actions import StopActions
from runtime.decision_recorder import CallView, Choice, DecisionRecorder, RecordResult
from runtime.metrics import count_decision, count_denied
from runtime.reporter import RunView
from runtime.run_record import HOME_TAB
from runtime.task_set import TaskSet

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class HomeActions:
    home: HomeTab
    recorder: DecisionRecorder
    gate: ApprovalGate
    reporter: SlackReporter
    stops: StopActions
    client: AsyncWebClient
    tasks: TaskSet

    async def on_home_opened(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        user = event.get("user")
        if event.get("tab", "home") == "home" and isinstance(user, str):
            await self.home.opened(user)

    async def on_approve(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        parsed = self._parse(body)
        if parsed is None:
            return
        click, ref = parsed
        always = click.action.action_id == ACTION_HOME_APPROVE_ALWAYS
        choice = Choice(
            outcome="approved_always" if always else "approved",
            user_id=click.user.id,
            user_name=click.user.display,
        )
        await self._decide(ref, choice)
        self.home.refresh(click.user.id)

    async def on_reject(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The reason modal, after the same checks as a decision made here; its submission is
        the card's (`ApprovalActions.on_reject_submitted`), from the run's channel."""
        await ack()
        parsed = self._parse(body)
        if parsed is None:
            return
        click, ref = parsed
        user_id = click.user.id
        try:
            view = await self.recorder.view(ref.run_id, ref.approval_id)
            member_of = await self.gate.groups_of(user_id, view.gate)
            check = await self.recorder.check(view, user_id, channel=HOME_TAB, member_of=member_of)
        except RedisError:
            self._tell(user_id, messages.TRY_AGAIN)
            return
        except DirectoryUnavailable:
            self._tell(user_id, messages.DIRECTORY_UNAVAILABLE)
            return
        if (
            view.call is None
            or view.gate is None
            or check.status not in ("open", "already_approved")
        ):
            await self._explain(user_id, check, view)
            return
        metadata = RejectMetadata(
            run_id=ref.run_id,
            approval_id=ref.approval_id,
            channel=view.gate.channel,
            message_ts=view.call.message_ts,
        )
        modal = reject_modal(view.call, metadata.model_dump_json())
        self._later(self.client.views_open(trigger_id=click.trigger_id, view=modal), "reject-modal")

    async def on_stop(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = HomeClick.model_validate(body)
        except ValidationError:
            log.warning("home stop click with an invalid payload refused")
            return
        text = await self.stops.stop(click.action.value, click.user.id, click.user.display)
        if text is not None:
            self._tell(click.user.id, text)
        self.home.refresh(click.user.id)

    async def _decide(self, ref: ApprovalRef, choice: Choice) -> None:
        user_id = choice.user_id or ""
        try:
            # Read first: the last decision may let the worker finish and delete the run.
            view = await self.recorder.view(ref.run_id, ref.approval_id)
            member_of = await self.gate.groups_of(user_id, view.gate)
            result = await self.recorder.decide(view, choice, channel=HOME_TAB, member_of=member_of)
        except RedisError:
            self._tell(user_id, messages.TRY_AGAIN)
            return
        except DirectoryUnavailable:
            self._tell(user_id, messages.DIRECTORY_UNAVAILABLE)
            return
        log.info(
            "run %s: %s from the Home tab by %s: %s",
            ref.run_id,
            choice.outcome,
            user_id,
            result.status,
        )
        if result.status == "recorded":
            count_decision(result.decision, card_ts=view.call.message_ts if view.call else None)
        if result.status in ("recorded", "counted"):
            self._redraw(view, result)
            return
        await self._explain(user_id, result, view)

    async def _explain(self, user_id: str, result: RecordResult, view: CallView) -> None:
        if result.status in ("not_allowed", "self"):
            count_denied()
        if result.status in REFUSED:
            text = await self.gate.refusal(result.status, view.gate) or messages.APPROVAL_UNKNOWN
        elif result.status == "already_approved" and view.call is not None:
            text = messages.already_approved(len(result.approvals), view.call.quorum)
        elif result.status == "decided" and result.decision is not None:
            text = messages.already_decided(result.decision)
        else:
            text = NOT_RECORDED.get(result.status, messages.APPROVAL_UNKNOWN)
        self._tell(user_id, text)

    def _redraw(self, view: CallView, result: RecordResult) -> None:
        """The card and every copy show the decision (or the approvals so far)."""
        if view.envelope is None or view.call is None or view.call.message_ts is None:
            return
        call = view.call.model_copy(
            update={"decision": result.decision, "approvals": result.approvals}
        )
        work = self.reporter.redraw(RunView.of(view.envelope), call)
        self._later(work, f"redraw:{call.approval_id}")

    def _parse(self, body: dict[str, Any]) -> tuple[HomeClick, ApprovalRef] | None:
        try:
            click = HomeClick.model_validate(body)
            return click, ApprovalRef.parse(click.action.value)
        except (ValidationError, ValueError):
            log.warning("home click with an invalid payload refused")
            return None

    def _tell(self, user_id: str, text: str) -> None:
        """A direct message from the app: the Home tab has no channel for a private note."""
        self._later(self.client.chat_postMessage(channel=user_id, text=text), "home-note")

    def _later(self, work: Coroutine[Any, Any, Any], name: str) -> None:
        self.tasks.spawn(_logged(work, name), name=name)


async def _logged(work: Coroutine[Any, Any, Any], name: str) -> None:
    try:
        await work
    except SlackApiError as error:
        log.warning("%s: Slack refused: %s", name, error.response.get("error"))
    except (ClientError, TimeoutError) as error:
        log.warning("%s: Slack unreachable: %s", name, type(error).__name__)
