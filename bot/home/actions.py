"""The Home tab's events and buttons: opening it, Approve, Approve with a note…, Approve always,
Reject, View full arguments and Stop.

A decision made here goes through the same checks and the same decision script as one made on
the card, from `run_record.HOME_TAB` instead of a channel; the card and each of its copies are
redrawn, and the tab republished. A Home tab has no channel for private notes, so what the
clicker must be told comes as a direct message from the app.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import arguments_modal, note_modal, reject_modal
from bot.home.blocks import ACTION_HOME_APPROVE_ALWAYS
from bot.home.tab import HomeTab
from bot.listeners.acknowledged import note_acknowledged
from bot.listeners.answers import Modal
from bot.listeners.approvals import full_arguments
from bot.listeners.gate import ApprovalGate, GateAnswer
from bot.listeners.stops import StopActions
from bot.reporting.reporter import SlackReporter
from bot.slack.client import open_modal, send_later
from bot.slack.events import HomeOpened
from bot.slack.payloads import ApprovalRef, HomeClick, RejectMetadata
from runtime.decisions import Choice
from runtime.failover import AcknowledgedDecisions
from runtime.process import TaskSet
from runtime.record import HOME_TAB

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class HomeActions:
    home: HomeTab
    gate: ApprovalGate
    reporter: SlackReporter
    stops: StopActions
    client: AsyncWebClient
    tasks: TaskSet
    acknowledged: AcknowledgedDecisions | None = None
    """Decisions told to people, looked for again after a Redis failover."""

    async def on_home_opened(self, event: HomeOpened) -> None:
        if event.tab == "home":
            await self.home.opened(event.user)

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
        await self._decide(ref, choice, click.user.team_id)
        self.home.refresh(click.user.id)

    async def on_reject(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The reason modal, after the same checks as a decision made here; its submission is
        the card's (`ApprovalActions.on_reject_submitted`), from the run's channel."""
        await self._modal(ack, body, reject_modal, "reject-modal")

    async def on_note(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """**Approve with a note…**: the note modal, as for Reject; its submission is the
        card's (`AnswerActions.on_note_submitted`)."""
        await self._modal(ack, body, note_modal, "note-modal")

    async def _modal(self, ack: AsyncAck, body: dict[str, Any], build: Modal, name: str) -> None:
        await ack()
        parsed = self._parse(body)
        if parsed is None:
            return
        click, ref = parsed
        user_id = click.user.id
        answer = await self.gate.check(ref, user_id, HOME_TAB, claimed_team=click.user.team_id)
        view = answer.view
        if not answer.may_decide or view is None or view.call is None or view.gate is None:
            send_later(self.tasks, self._explain(user_id, answer), "home-note")
            return
        metadata = RejectMetadata(
            run_id=ref.run_id,
            approval_id=ref.approval_id,
            channel=view.gate.channel,
            message_ts=view.call.message_ts,
            digest=ref.digest,
        )
        requester = view.gate.requester if view.gate else None
        modal = build(view.call, metadata.model_dump_json(), requester)
        open_modal(self.tasks, self.client, click.trigger_id, modal, name)

    async def on_view_arguments(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """All of the call's arguments, as the card's **View full arguments** shows them."""
        await ack()
        parsed = self._parse(body)
        if parsed is None:
            return
        click, ref = parsed
        found = await full_arguments(self.gate.recorder, ref)
        if isinstance(found, str):
            self._tell(click.user.id, found)
            return
        modal = arguments_modal(found)
        open_modal(self.tasks, self.client, click.trigger_id, modal, "args-modal")

    async def on_stop(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        try:
            click = HomeClick.model_validate(body)
        except ValidationError:
            log.warning("home stop click with an invalid payload refused")
            return
        text = await self.stops.stop(
            click.action.value,
            click.user.id,
            click.user.display,
            where=HOME_TAB,
            claimed_team=click.user.team_id,
        )
        if text is not None:
            self._tell(click.user.id, text)
        self.home.refresh(click.user.id)

    async def _decide(self, ref: ApprovalRef, choice: Choice, claimed_team: str | None) -> None:
        user_id = choice.user_id or ""
        answer = await self.gate.decide(ref, choice, HOME_TAB, claimed_team=claimed_team)
        status = answer.result.status if answer.result else "failed"
        log.info(
            "run %s: %s from the Home tab by %s: %s", ref.run_id, choice.outcome, user_id, status
        )
        if answer.took_effect:
            note_acknowledged(self.acknowledged, answer, choice, where=HOME_TAB, card_ts=None)
            self._redraw(answer)
            send_later(self.tasks, self.gate.redraw_status(self.reporter, answer), "status")
            return
        send_later(self.tasks, self._explain(user_id, answer), "home-note")
        if answer.unconfirmed is not None:
            send_later(self.tasks, self._redraw_once_confirmed(answer), "confirm")

    async def _redraw_once_confirmed(self, answer: GateAnswer) -> None:
        """As on the card (`ApprovalActions`): a choice confirmed late is shown on every copy."""
        confirmed = await self.gate.once_confirmed(answer)
        if confirmed is not None:
            self._redraw(confirmed)

    async def _explain(self, user_id: str, answer: GateAnswer) -> None:
        """A direct message from the app: the Home tab has no channel for a private note."""
        text = await self.gate.explanation(answer)
        await self.client.chat_postMessage(channel=user_id, text=text)

    def _redraw(self, answer: GateAnswer) -> None:
        """The card and every copy show the decision (or the approvals so far)."""
        found = self.gate.card_after(answer)
        if found is not None:
            run, call = found
            send_later(self.tasks, self.reporter.redraw(run, call), f"redraw:{call.approval_id}")

    def _parse(self, body: dict[str, Any]) -> tuple[HomeClick, ApprovalRef] | None:
        try:
            click = HomeClick.model_validate(body)
            return click, ApprovalRef.parse(click.action.value)
        except (ValidationError, ValueError):
            log.warning("home click with an invalid payload refused")
            return None

    def _tell(self, user_id: str, text: str) -> None:
        """A direct message from the app: the Home tab has no channel for a private note."""
        send_later(
            self.tasks, self.client.chat_postMessage(channel=user_id, text=text), "home-note"
        )
