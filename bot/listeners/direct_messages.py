"""The app's own messages: a person writing to it (its Messages tab, a direct message thread),
and opening that tab.

A message there starts a run as `/agent` does: the same words (`agent: task`, or a task for the
first agent), the same check of who may start one (`bot.listeners.requesters`), the same job.
Its conversation is the person's direct message (`Conversation.direct`), its thread the
person's message (`Conversation.opened`), and its session's title the task. Its cards go to the
approvers' channel (a rule's `channel`, else `APPROVAL_CHANNEL`: `runtime.policy.verdicts`),
never only to the requester; with neither set the run is refused in one sentence to the person
and one log line for the admin, and nothing is queued. A reply in a run's thread continues the
run (`bot.listeners.threads`), under the same checks.

Only a person's own new message counts: the app's own messages, edits, deletions and every
other subtype are ignored, so nothing the app says can start a run.

Opening the Messages tab (`app_home_opened` with `tab: "messages"`) sets its suggested prompts:
up to four of the registry's agents, each its name and one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiohttp import ClientError
from redis.exceptions import RedisError
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.listeners.commands import parse_command_text
from bot.listeners.requesters import Requesters
from bot.listeners.threads import Message, ThreadReplies, said
from bot.slack.events import HomeOpened, Said, is_direct
from bot.words import messages_tab as words
from runtime.db import NotReplicated
from runtime.jobs import Conversation, JobQueue, StartJob

log = logging.getLogger(__name__)

HOW = "a message to the app"
"""How such a run was asked for, in the log."""


@dataclass(kw_only=True)
class DirectMessages:
    queue: JobQueue
    requesters: Requesters
    client: AsyncWebClient
    agents: list[str]
    replies: ThreadReplies
    """A reply in a run's thread continues that run."""
    cards_have_a_channel: bool
    """`APPROVAL_CHANNEL` or a rule's `channel` is set (`Policy.names_a_card_channel`)."""
    lines: Mapping[str, str]
    """Each agent's one line, for the suggested prompts."""
    _prompts_off: str | None = None

    async def on_message(self, event: Said) -> None:
        message = said(event)
        if message is None or not message.text or not is_direct(message.channel):
            return
        thread = message.thread or message.ts
        if not self.cards_have_a_channel:
            self.refuse(message.user, HOW)
            await self._say(message, words.NO_APPROVAL_CHANNEL, thread)
            return
        if message.thread is not None and await self.replies.reply(message, message.thread):
            return
        parsed = parse_command_text(message.text, self.agents)
        if parsed.kind != "task":
            told = words.empty_task(parsed.agent) if parsed.kind == "empty_task" else None
            await self._say(message, told or words.NOT_A_TASK, thread)
            return
        try:
            admission = await self.requesters.admit(message.user, HOW)
        except RedisError:  # where each person's standing is cached
            await self._say(message, words.NOT_STARTED, thread)
            return
        if admission.refusal is not None:
            await self._say(message, admission.refusal, thread)
            return
        job = StartJob(
            run_id=message.run_id,
            agent=parsed.agent,
            task=parsed.task,
            conversation=Conversation(
                channel=message.channel,
                requester=message.user,
                requester_external=admission.external,
                direct=True,
                opened=thread,
            ),
            requested_at=time.time(),
        )
        try:
            await self.queue.enqueue(
                job.job_id, job.payload(), run_id=job.run_id, version=job.version
            )
        except NotReplicated as error:  # written, not yet on a replica: it may well run
            log.warning("run %s: enqueued, not confirmed: %s", job.run_id, error)
            return
        except RedisError:
            log.warning("run %s not started: job queue unreachable", job.run_id)
            await self._say(message, words.NOT_STARTED, thread)
            return
        log.info("run %s: enqueued for %s (%s), %s", job.run_id, message.user, job.agent, HOW)

    @staticmethod
    def refuse(user: str, how: str) -> None:
        """The admin's line for a run refused for want of an approvers' channel."""
        log.warning(words.NO_APPROVAL_CHANNEL_LOG, how, user)

    async def on_messages_tab(self, event: HomeOpened) -> None:
        """The Messages tab opened: its suggested prompts, from the registry's agents."""
        if event.channel is None or self._prompts_off is not None:
            return
        prompts = [words.prompt(name, self.lines.get(name, "")) for name in self.agents]
        try:
            await self.client.assistant_threads_setSuggestedPrompts(
                channel_id=event.channel,
                title=words.PROMPTS_TITLE,
                prompts=prompts[: words.PROMPTS_MOST],
            )
        except SlackApiError as error:
            code = str(error.response.get("error"))
            if code in ("missing_scope", "not_allowed", "method_not_supported"):
                # Said once: the app lacks `assistant:write` or `agent_view`; the tab works
                # without prompts.
                self._prompts_off = code
                log.warning(
                    "Messages tab without suggested prompts: Slack answered %s (add the "
                    "assistant:write scope and agent_view to the Slack app, and reinstall it)",
                    code,
                )
            else:
                log.warning("suggested prompts not set for %s: %s", event.user, code)
        except (ClientError, TimeoutError) as error:
            log.warning("suggested prompts not set for %s: %s", event.user, error)

    async def _say(self, message: Message, text: str, thread: str) -> None:
        try:
            await self.client.chat_postMessage(channel=message.channel, thread_ts=thread, text=text)
        except SlackApiError as error:
            log.warning("could not answer %s: %s", message.user, error.response.get("error"))
