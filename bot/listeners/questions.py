"""Answers to an MCP server's questions: **Answer** (opens the form), the form's submission,
closing it, **Decline** and **Done**, each MCP's `accept`, `decline` or `cancel`.

Every answer goes through the answer script (`runtime.mcp.questions`), which alone says who
may answer (the requester, or the server's rule's `elicitation_responders`: the web looks up
only which of the named groups the person is in), whether the question is still open and a
worker still waits for it, and takes the first answer; **Answer** asks it the same, with
`check`, before opening the form. A refusal is told to the person privately.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.questions import QuestionRef, form_modal, form_values
from bot.slack.client import open_modal, send_later
from bot.slack.directory import DirectoryUnavailable
from bot.slack.payloads import ButtonClick, ViewSubmission
from bot.words import questions as words
from runtime.deciders import Members, first_member_of, is_group
from runtime.mcp import Action, QuestionStore, StoredQuestion
from runtime.process import TaskSet

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class QuestionActions:
    store: QuestionStore
    client: AsyncWebClient
    directory: Members
    tasks: TaskSet

    async def on_answer(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """**Answer**: the form in a modal, once the script says this person may answer."""
        await ack()
        found = await self._clicked(body)
        if found is None:
            return
        click, ref, stored = found
        if not await self._answer(click.user.id, stored, ref, "accept", check=True):
            return
        modal = form_modal(stored.question, ref)
        if modal is None:
            log.warning("run %s: a question's form cannot be drawn", ref.run_id)
            return
        open_modal(self.tasks, self.client, click.trigger_id, modal, "question-form")

    async def on_decline(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        if (found := await self._clicked(body)) is not None:
            click, ref, stored = found
            await self._answer(click.user.id, stored, ref, "decline")

    async def on_done(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """**Done** on a link: the person went there (MCP's `accept`, without values)."""
        await ack()
        if (found := await self._clicked(body)) is not None:
            click, ref, stored = found
            await self._answer(click.user.id, stored, ref, "accept")

    async def on_form_submitted(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        parsed = ViewSubmission.with_metadata(body, QuestionRef)
        if parsed is None:
            log.warning("question form with an invalid payload refused")
            await ack()
            return
        submission, ref = parsed
        stored = await self._read(ref, submission.user.id)
        if stored is None:
            await ack()
            return
        values, errors = form_values(submission.view.state, stored.question.requested_schema)
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        await ack()
        await self._answer(submission.user.id, stored, ref, "accept", values)

    async def on_form_closed(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """The form closed without sending: MCP's `cancel`."""
        await ack()
        parsed = ViewSubmission.with_metadata(body, QuestionRef)
        if parsed is None:
            return
        submission, ref = parsed
        if (stored := await self._read(ref, submission.user.id)) is not None:
            await self._answer(submission.user.id, stored, ref, "cancel")

    async def _clicked(
        self, body: dict[str, Any]
    ) -> tuple[ButtonClick, QuestionRef, StoredQuestion] | None:
        try:
            click = ButtonClick.model_validate(body)
            ref = QuestionRef.parse(click.action.value).model_copy(
                update={"channel": click.channel.id, "message_ts": click.container.message_ts}
            )
        except (ValidationError, ValueError):
            log.warning("question click with an invalid payload refused")
            return None
        stored = await self._read(ref, click.user.id)
        return None if stored is None else (click, ref, stored)

    async def _read(self, ref: QuestionRef, user: str) -> StoredQuestion | None:
        try:
            stored = await self.store.read(ref.run_id, ref.question_id)
        except RedisError:
            self._tell(ref, user, None, words.TRY_AGAIN)
            return None
        if stored is None:
            self._tell(ref, user, None, words.QUESTION_GONE)
        return stored

    async def _answer(
        self,
        user: str,
        stored: StoredQuestion,
        ref: QuestionRef,
        action: Action,
        values: dict[str, Any] | None = None,
        *,
        check: bool = False,
    ) -> bool:
        """Through the answer script; True when it took the answer (or, with `check`, would)."""
        question = stored.question
        groups = await self._groups_of(user, question.responders)
        try:
            reply = await self.store.answer(
                ref.run_id,
                ref.question_id,
                by=user,
                action=action,
                content=values,
                groups=groups,
                check=check,
                channel=ref.channel,
            )
        except RedisError:
            self._tell(ref, user, question.thread, words.TRY_AGAIN)
            return False
        refusal = _refusal(reply, stored)
        if refusal is not None:
            self._tell(ref, user, question.thread, refusal)
            return False
        return True

    async def _groups_of(self, user: str, responders: tuple[str, ...]) -> tuple[str, ...]:
        groups = [p for p in responders if is_group(p) and p != user]
        try:
            return await first_member_of(user, groups, self.directory)
        except DirectoryUnavailable:
            return ()

    def _tell(self, ref: QuestionRef, user: str, thread: str | None, text: str) -> None:
        if ref.channel is None:
            return
        work = self.client.chat_postEphemeral(
            channel=ref.channel, user=user, text=text, thread_ts=thread
        )
        send_later(self.tasks, work, "question-refusal")


def _refusal(reply: list[str], stored: StoredQuestion) -> str | None:
    """What to tell the person the script refused, in words; None if it took the answer."""
    status = reply[0] if reply else "gone"
    question = stored.question
    if status in ("answered", "may"):
        return None
    if status == "answered_before":
        return words.answered_before(reply[1], reply[2])
    if status == "ended":
        return words.QUESTION_ENDED
    if status == "expired":
        return words.QUESTION_EXPIRED
    if status == "not_allowed":
        return words.not_a_responder(question.responders, question.requester)
    return words.QUESTION_GONE
