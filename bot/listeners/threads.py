"""Keep talking in the thread: a reply in a run's thread, or a mention of the app.

A reply in a run's thread (a person's `message` whose `thread_ts` is a run's root, not an edit)
starts a new run of the thread's last agent, posting in the same thread, with the earlier turns
as its history (`runtime.conversations.threads`) and the person who replied as its requester,
so the self-approval rules apply to them. While the last run still works or waits, the reply
is answered in the thread and starts nothing; of replies racing, one takes the turn in one
step (`ThreadHistory.follow`) and the others are answered so. A mention of the app
(`app_mention`) in a run's thread is such a reply; anywhere else it starts a run as `/agent`
does.

Slack sends a mention in a thread twice (as `app_mention` and as `message`): both map to the
same run id (seeded by the message), so the second is one enqueue the queue drops, and is not
mistaken for a reply during that run.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners.commands import parse_command_text
from bot.words import threads as words
from runtime.conversations import ThreadHistory
from runtime.db import NotReplicated
from runtime.jobs import Conversation, JobQueue, StartJob, new_run_id

log = logging.getLogger(__name__)

_MENTION = re.compile(r"<@[A-Z0-9]+(?:\|[^>]*)?>")
_REPLIES = (None, "thread_broadcast")
"""A person's message: plain, or a reply also sent to the channel. Edits, deletions, joins
and bots' messages have other subtypes."""


@dataclass(frozen=True, slots=True)
class Said:
    channel: str
    user: str
    text: str
    ts: str
    thread: str | None

    @property
    def run_id(self) -> str:
        """The run this message starts: the same for each of Slack's deliveries of it."""
        return new_run_id(seed=f"said:{self.channel}:{self.ts}")


def said(event: dict[str, Any]) -> Said | None:
    """A person's message, or None (a bot's, an edit, a deletion, one without words)."""
    if event.get("bot_id") or event.get("subtype") not in _REPLIES:
        return None
    channel, user, ts = event.get("channel"), event.get("user"), event.get("ts")
    text = _MENTION.sub("", str(event.get("text") or "")).strip()[:4000]
    if not (isinstance(channel, str) and isinstance(user, str) and isinstance(ts, str)):
        return None
    thread = event.get("thread_ts")
    in_thread = isinstance(thread, str) and thread != ts
    return Said(channel, user, text, ts, thread if in_thread else None)


@dataclass(kw_only=True)
class ThreadReplies:
    history: ThreadHistory
    queue: JobQueue
    client: AsyncWebClient
    agents: list[str]

    async def on_message(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        message = said(event)
        if message is not None and message.thread is not None and message.text:
            await self._reply(message, message.thread)

    async def on_mention(self, ack: AsyncAck, event: dict[str, Any]) -> None:
        await ack()
        message = said(event)
        if message is None:
            return
        if not message.text:
            await self._say(message, words.MENTION_EMPTY, thread=message.thread)
            return
        if message.thread is not None and await self._reply(message, message.thread):
            return
        parsed = parse_command_text(message.text, self.agents)
        if parsed.kind != "task":
            await self._say(message, words.MENTION_EMPTY)
            return
        await self._enqueue(message, parsed.agent, parsed.task, thread=None, continues=None)

    async def _reply(self, message: Said, thread: str) -> bool:
        """Continue the thread's run; False if the thread is no run's."""
        try:
            last = await self.history.last_run(message.channel, thread)
            if last is None:
                return False
            if last.run_id == message.run_id:
                return True  # Slack's other delivery of this very message
            busy = await self.history.busy(last)
            if busy or not await self.history.follow(
                message.channel, thread, last.run_id, message.run_id, last.agent
            ):
                told = words.STILL_WAITING if busy == "waiting" else words.STILL_WORKING
                await self._say(message, told, thread=thread)
                return True
        except RedisError:
            await self._say(message, words.REPLY_NOT_STARTED, thread=thread)
            return True
        if not await self._enqueue(
            message, last.agent, message.text, thread, continues=last.run_id
        ):
            # Told to try again: the turn goes back, or the retry would be told to wait.
            with contextlib.suppress(RedisError):
                await self.history.give_back(message.channel, thread, message.run_id, last)
        return True

    async def _enqueue(
        self, message: Said, agent: str, task: str, thread: str | None, continues: str | None
    ) -> bool:
        """Enqueue the message's run; False (and the person told so) if the queue is away."""
        job = StartJob(
            run_id=message.run_id,
            agent=agent,
            task=task,
            conversation=Conversation(
                channel=message.channel, requester=message.user, thread=thread
            ),
            requested_at=time.time(),
            continues=continues,
        )
        try:
            await self.queue.enqueue(
                job.job_id, job.payload(), run_id=job.run_id, version=job.version
            )
        except NotReplicated as error:  # written, not yet on a replica: it may well run
            log.warning("run %s: enqueued, not confirmed: %s", job.run_id, error)
            return True
        except RedisError:
            log.warning("run %s not started: job queue unreachable", job.run_id)
            await self._say(message, words.REPLY_NOT_STARTED, thread=thread)
            return False
        log.info(
            "run %s: enqueued for %s (%s), continues %s", job.run_id, message.user, agent, continues
        )
        return True

    async def _say(self, message: Said, text: str, *, thread: str | None = None) -> None:
        try:
            await self.client.chat_postMessage(
                channel=message.channel, thread_ts=thread or message.ts, text=text
            )
        except SlackApiError as error:
            log.warning("could not answer in %s: %s", message.channel, error.response.get("error"))
