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
mistaken for a reply during that run. A thread whose run still works is told so at most once a
minute (`ThreadHistory.first_notice`), however many replies (or deliveries of one) arrive.

Only people who may start a run (`bot.listeners.requesters`, `EXTERNAL_REQUESTERS`) start one
here; anyone else is told why, privately, once per message.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from dataclasses import dataclass

from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners.commands import parse_command_text
from bot.listeners.requesters import Admission, Requesters
from bot.slack.events import Said, is_direct
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
class Message:
    channel: str
    user: str
    text: str
    ts: str
    thread: str | None

    @property
    def run_id(self) -> str:
        """The run this message starts: the same for each of Slack's deliveries of it."""
        return new_run_id(seed=f"said:{self.channel}:{self.ts}")


def said(event: Said) -> Message | None:
    """A person's message, or None (a bot's, an edit, a deletion, one without words)."""
    if event.bot_id or event.subtype not in _REPLIES:
        return None
    channel, user, ts = event.channel, event.user, event.ts
    if channel is None or user is None or ts is None:
        return None
    text = _MENTION.sub("", event.text or "").strip()[:4000]
    in_thread = event.thread_ts is not None and event.thread_ts != ts
    return Message(channel, user, text, ts, event.thread_ts if in_thread else None)


@dataclass(kw_only=True)
class ThreadReplies:
    history: ThreadHistory
    queue: JobQueue
    client: AsyncWebClient
    agents: list[str]
    requesters: Requesters
    """Who may start a run (`EXTERNAL_REQUESTERS`)."""

    async def on_message(self, event: Said) -> None:
        message = said(event)
        if message is not None and message.thread is not None and message.text:
            await self.reply(message, message.thread)

    async def on_mention(self, event: Said) -> None:
        message = said(event)
        if message is None:
            return
        if not message.text:
            await self._say(message, words.MENTION_EMPTY, thread=message.thread)
            return
        if message.thread is not None and await self.reply(message, message.thread):
            return
        parsed = parse_command_text(message.text, self.agents)
        if parsed.kind != "task":
            await self._say(message, words.MENTION_EMPTY)
            return
        admission = await self._admit(message, "a mention")
        if admission is not None:
            await self._enqueue(
                message, parsed.agent, parsed.task, None, continues=None, admission=admission
            )

    async def reply(self, message: Message, thread: str) -> bool:
        """Continue the thread's run; False if the thread is no run's."""
        try:
            last = await self.history.last_run(message.channel, thread)
            if last is None:
                return False
            if last.run_id == message.run_id:
                return True  # Slack's other delivery of this very message
        except RedisError:
            await self._say(message, words.REPLY_NOT_STARTED, thread=thread)
            return True
        admission = await self._admit(message, "a reply")
        if admission is None:
            return True
        try:
            busy = await self.history.busy(last)
            if busy or not await self.history.follow(
                message.channel, thread, last.run_id, message.run_id, last.agent
            ):
                # Once a minute per thread, not once per reply (nor per delivery of a mention).
                if await self.history.first_notice(f"working:{message.channel}:{thread}"):
                    told = words.STILL_WAITING if busy == "waiting" else words.STILL_WORKING
                    await self._say(message, told, thread=thread)
                return True
        except RedisError:
            await self._say(message, words.REPLY_NOT_STARTED, thread=thread)
            return True
        if not await self._enqueue(
            message, last.agent, message.text, thread, continues=last.run_id, admission=admission
        ):
            # Told to try again: the turn goes back, or the retry would be told to wait.
            with contextlib.suppress(RedisError):
                await self.history.give_back(message.channel, thread, message.run_id, last)
        return True

    async def _admit(self, message: Message, how: str) -> Admission | None:
        """The person may start a run (None: they may not, and were told why, privately)."""
        try:
            admission = await self.requesters.admit(message.user, how)
        except RedisError:  # where each person's standing is cached
            await self._say(message, words.REPLY_NOT_STARTED, thread=message.thread)
            return None
        if admission.refusal is None:
            return admission
        try:  # Slack delivers a mention in a run's thread twice: one note
            first = await self.history.first_notice(f"refused:{message.run_id}")
        except RedisError:
            first = True
        if first:
            await self._tell(message, admission.refusal)
        return None

    async def _enqueue(
        self,
        message: Message,
        agent: str,
        task: str,
        thread: str | None,
        *,
        continues: str | None,
        admission: Admission,
    ) -> bool:
        """Enqueue the message's run; False (and the person told so) if the queue is away."""
        job = StartJob(
            run_id=message.run_id,
            agent=agent,
            task=task,
            conversation=Conversation(
                channel=message.channel,
                requester=message.user,
                requester_external=admission.external,
                thread=thread,
                # A reply in a direct message's run: its cards go to the approvers' channel too.
                direct=is_direct(message.channel),
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

    async def _tell(self, message: Message, text: str) -> None:
        """Only the person who wrote `message` sees `text` (in its thread, if it is in one)."""
        try:
            await self.client.chat_postEphemeral(
                channel=message.channel, user=message.user, text=text, thread_ts=message.thread
            )
        except SlackApiError as error:
            log.warning("could not tell %s: %s", message.user, error.response.get("error"))

    async def _say(self, message: Message, text: str, *, thread: str | None = None) -> None:
        try:
            await self.client.chat_postMessage(
                channel=message.channel, thread_ts=thread or message.ts, text=text
            )
        except SlackApiError as error:
            log.warning("could not answer in %s: %s", message.channel, error.response.get("error"))
