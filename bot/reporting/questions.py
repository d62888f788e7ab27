"""An MCP server's questions in Slack (the runtime's `QuestionNotices`): a message in the run's
thread, a copy in the requester's direct messages with the app, both redrawn once answered."""

from __future__ import annotations

import logging

from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.questions import question_blocks, settled_blocks
from bot.reporting.copies import SLACK_ERRORS
from bot.words import questions as words
from runtime.mcp import PostedMessage, Question, StoredQuestion
from runtime.reporter import RunView

log = logging.getLogger(__name__)


class SlackQuestions:
    def __init__(self, client: AsyncWebClient, *, wait_seconds: int) -> None:
        self._client = client
        self._wait_seconds = wait_seconds

    async def asked(
        self, run: RunView, question: Question, deadline: float
    ) -> tuple[PostedMessage, ...]:
        posted: list[PostedMessage] = []
        text = words.asked(
            question.server,
            question.tool,
            question.requester,
            question.message,
            url=question.mode == "url",
        )
        targets: list[tuple[str, str | None, bool]] = [
            (run.conversation.channel, run.conversation.thread, False)
        ]
        dm = await self._direct_messages(run, question.requester)
        if dm is not None and dm != run.conversation.channel:
            targets.append((dm, None, True))
        for channel, thread, copy in targets:
            try:
                response = await self._client.chat_postMessage(
                    channel=channel,
                    thread_ts=thread,
                    text=text,
                    blocks=question_blocks(question, deadline, copy=copy),
                    unfurl_links=False,
                    unfurl_media=False,
                )
            except SLACK_ERRORS as error:
                log.warning("run %s: question not shown in %s: %s", run.run_id, channel, error)
                continue
            posted.append(PostedMessage(channel=str(response["channel"]), ts=str(response["ts"])))
        return tuple(posted)

    async def settled(self, run: RunView, stored: StoredQuestion) -> None:
        blocks = settled_blocks(stored)
        text = words.settled(stored.state, stored.by)
        for message in stored.messages:
            try:
                await self._client.chat_update(
                    channel=message.channel, ts=message.ts, text=text, blocks=blocks
                )
            except SLACK_ERRORS as error:
                log.warning("run %s: question not redrawn: %s", run.run_id, error)
        if stored.by != "timeout":
            return
        try:
            await self._client.chat_postMessage(
                channel=run.conversation.channel,
                thread_ts=run.conversation.thread,
                text=words.timed_out(stored.question.server, self._wait_seconds),
            )
        except SLACK_ERRORS as error:
            log.warning("run %s: question's timeout not told: %s", run.run_id, error)

    async def _direct_messages(self, run: RunView, person: str) -> str | None:
        try:
            response = await self._client.conversations_open(users=person)
        except SLACK_ERRORS as error:
            log.warning("run %s: no direct message with %s: %s", run.run_id, person, error)
            return None
        return str(response["channel"]["id"])
