"""`/agent`: validate, enqueue a start job, answer within Slack's 3 seconds.

Nothing slow happens here: the worker posts the run's root message. The acknowledgement goes
out only after the job is safely in Redis, so an acknowledged command is never lost.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from redis.exceptions import RedisError
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.commands import did_you_mean_blocks
from bot.listeners.grants import GrantActions
from bot.listeners.near_misses import nearest
from bot.listeners.requesters import Requesters
from bot.listeners.stats import ChannelStatsAnswer
from bot.listeners.status import RunStatus
from bot.listeners.stops import StopActions
from bot.slack.client import response_url, send_later
from bot.slack.events import is_direct
from bot.slack.payloads import EphemeralClick, SlashCommand, TaskOffer
from bot.words import audit as audit_messages
from bot.words import commands as command_words
from bot.words import messages_tab as tab_words
from bot.words import runs as messages
from bot.words import stats as stats_words
from runtime.audit import AuditTrail
from runtime.db import NotReplicated
from runtime.jobs import Conversation, JobQueue, StartJob, new_run_id
from runtime.mcp import McpListings
from runtime.process import TaskSet

log = logging.getLogger(__name__)

# `name: task` picks an agent when `name` is one word; anything else is a task. An empty task
# after the colon is caught (`ops:` is not the task "ops:").
_AGENT_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.\-]{1,64})\s*:\s*(.*)$", re.DOTALL)
# The first word, when it stands alone or before a colon: a command word there is always the
# command, so `stop r-typo` is told how to write it, never run as the task "stop r-typo".
_FIRST_WORD = re.compile(r"^([A-Za-z]+)(?:\s*:?\s+|\s*:\s*|$)(.*)$", re.DOTALL)
# A task of one word only (`stp`, `stauts`) is checked against the command words.
_ONE_WORD = re.compile(r"[A-Za-z]+")
_RUN_ID = r"r[0-9a-f]{16}"
_IS_RUN_ID = re.compile(rf"^{_RUN_ID}$")
# What each command takes after its word (the whole rest must match; group 1 is the argument).
_TAKES: dict[str, re.Pattern[str]] = {
    command_words.HELP.name: re.compile(r"(?:.*)", re.DOTALL),  # `help me` is still the help
    command_words.STATUS.name: re.compile(rf"({_RUN_ID})?"),
    command_words.STOP.name: re.compile(rf"({_RUN_ID})"),
    command_words.GRANTS.name: re.compile(r""),
    command_words.AUDIT.name: re.compile(rf"({_RUN_ID}|[1-9][0-9]*)?"),
    command_words.STATS.name: re.compile(r"([1-9][0-9]*)?"),
}
COMMANDS: dict[str, command_words.CommandWords] = {
    word: words for words in command_words.COMMANDS for word in (words.name, *words.aliases)
}
"""Each command word (aliases too) and its words: the help is written from the same table."""
AUDIT_WINDOW_SECONDS = 3600.0
"""`/agent audit` alone: this channel's events of the last hour."""


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    kind: str
    """A command's name (`help`, `status`, `stop`, `grants`, `audit`, `stats`); `usage` (a
    command word followed by what it does not take: `agent` names the command);
    `did_you_mean` (one word near a command word, or a command word without the argument it
    needs: `agent` names the command, `task` is the word as typed); `unknown_agent`;
    `empty_task` (an agent named with nothing to do); or `task`."""
    agent: str = ""
    task: str = ""


def parse_command_text(text: str, agents: list[str]) -> ParsedCommand:
    stripped = text.strip()
    if stripped.lower() in ("", "-h", "--help", "?"):
        return ParsedCommand("help")
    first = _FIRST_WORD.match(stripped)
    words = COMMANDS.get(first.group(1).lower()) if first is not None else None
    if first is not None and words is not None:
        rest = first.group(2).strip()
        if not rest and words.arguments.startswith("<"):
            return ParsedCommand("did_you_mean", words.name, stripped)
        taken = _TAKES[words.name].fullmatch(rest)
        if taken is None or _too_many(words, rest):
            return ParsedCommand("usage", words.name, rest)
        argument = taken.group(1) if taken.re.groups else ""
        return ParsedCommand(words.name, task=argument or "")
    if _ONE_WORD.fullmatch(stripped) and (near := nearest(stripped, COMMANDS)) is not None:
        return ParsedCommand("did_you_mean", COMMANDS[near].name, stripped)
    match = _AGENT_PREFIX.match(stripped)
    if match is None:
        return ParsedCommand("task", agents[0], stripped)
    name, task = match.group(1), match.group(2).strip()
    if name in agents:
        return ParsedCommand("task", name, task) if task else ParsedCommand("empty_task", name)
    if name.startswith(("http", "https")):  # a URL like https://… is a task, not an agent name
        return ParsedCommand("task", agents[0], stripped)
    return ParsedCommand("unknown_agent", name)


_MOST = {
    command_words.AUDIT.name: command_words.AUDIT_MOST,
    command_words.STATS.name: stats_words.STATS_MOST_DAYS,
}
"""The largest number each command that takes one accepts."""


def _too_many(words: command_words.CommandWords, count: str) -> bool:
    most = _MOST.get(words.name)
    return most is not None and count.isdecimal() and int(count) > most


@dataclass(kw_only=True)
class AgentCommand:
    queue: JobQueue
    audit: AuditTrail
    agents: list[str]
    stops: StopActions
    statuses: RunStatus
    grants: GrantActions
    stats: ChannelStatsAnswer
    requesters: Requesters
    """Who may start a run (`EXTERNAL_REQUESTERS`)."""
    client: AsyncWebClient
    """Its HTTP session carries the posts to a click's `response_url`."""
    tasks: TaskSet
    mcp_listings: McpListings | None = None
    """Where workers publish each agent's MCP tools; the web never connects MCP servers."""
    cards_have_a_channel: bool = True
    """`APPROVAL_CHANNEL` or a rule's `channel` is set: a run asked for in a direct message
    may start (its cards go there, `bot.listeners.direct_messages`)."""

    async def __call__(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            command = SlashCommand.model_validate(body)
        except ValidationError:
            log.warning("slash command with an invalid payload refused")
            await _reply(ack, messages.BUTTON_INVALID)
            return
        parsed = parse_command_text(command.text, self.agents)
        if parsed.kind == "grants":
            text, blocks = await self.grants.listing(command.channel_id)
            await ack(response_type="ephemeral", text=text, blocks=blocks or None)
            return
        if parsed.kind == "did_you_mean":
            await self._did_you_mean(ack, command, parsed)
            return
        await _reply(ack, await self._answer(command, parsed))

    async def _did_you_mean(
        self, ack: AsyncAck, command: SlashCommand, parsed: ParsedCommand
    ) -> None:
        """Ask, privately, with **Run as a task** for the rare task of one such word."""
        agent = self.agents[0]
        text = command_words.command_did_you_mean(
            command.command, COMMANDS[parsed.agent], parsed.task, agent
        )
        offer = TaskOffer(
            command=command.command, agent=agent, task=parsed.task, trigger=command.trigger_id
        )
        blocks = did_you_mean_blocks(text, offer.model_dump_json())
        await ack(response_type="ephemeral", text=text, blocks=blocks)

    async def on_run_as_task(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        """**Run as a task**: start the run the command would have started, as `/agent` does."""
        await ack()
        try:
            click = EphemeralClick.model_validate(body)
            offer = TaskOffer.model_validate_json(click.action.value)
        except ValidationError:
            log.warning("run-as-task click with an invalid payload refused")
            return
        if offer.agent not in self.agents:
            log.warning("run-as-task click for an unknown agent refused")
            return
        command = SlashCommand(
            command=offer.command,
            text=offer.task,
            user_id=click.user.id,
            user_name=click.user.display,
            channel_id=click.channel.id,
            trigger_id=offer.trigger,
            response_url=click.response_url,
        )
        text = await self._start(command, offer.agent, offer.task)
        if click.response_url is not None:
            # Started: the answer replaces the question, and its button with it. Not started
            # (Redis away): said beside it, and the button still works.
            started = text == messages.command_starting(offer.agent)
            answer = response_url(click.response_url, self.client).send(
                text=text, response_type="ephemeral", replace_original=started
            )
            send_later(self.tasks, answer, "run-as-task answer")

    async def _answer(self, command: SlashCommand, parsed: ParsedCommand) -> str:
        """What to answer a command that is answered in words alone (a task: once enqueued)."""
        if parsed.kind == "usage":
            words = COMMANDS[parsed.agent]
            return command_words.command_usage(command.command, words, parsed.task, self.agents[0])
        if parsed.kind == "empty_task":
            return command_words.command_empty_task(command.command, parsed.agent)
        if parsed.kind == "help":
            mcp = await self._mcp()
            return command_words.command_help(command.command, self.agents, mcp)
        if parsed.kind == "stop":
            told = await self.stops.stop(
                parsed.task, command.user_id, command.user_name, where=command.channel_id
            )
            return told or messages.STOP_REQUESTED
        if parsed.kind == "status":
            return await self.statuses.answer(command.channel_id, command.user_id, parsed.task)
        if parsed.kind == "audit":
            return await self._audit(command.command, parsed.task, command.channel_id)
        if parsed.kind == "stats":
            days = int(parsed.task) if parsed.task else stats_words.STATS_DAYS
            return await self.stats.answer(command.command, command.channel_id, days)
        if parsed.kind == "unknown_agent":
            return command_words.command_unknown_agent(command.command, parsed.agent, self.agents)
        return await self._start(command, parsed.agent, parsed.task)

    async def _start(self, command: SlashCommand, agent: str, task: str) -> str:
        """Enqueue a run, if the person may start one; what to answer."""
        try:
            admission = await self.requesters.admit(command.user_id, command.command)
        except RedisError:  # where each person's standing is cached
            log.warning("%s by %s not started: Redis unreachable", command.command, command.user_id)
            return messages.QUEUE_UNAVAILABLE
        if admission.refusal is not None:
            return admission.refusal
        direct = is_direct(command.channel_id)
        if direct and not self.cards_have_a_channel:
            log.warning(tab_words.NO_APPROVAL_CHANNEL_LOG, command.command, command.user_id)
            return tab_words.NO_APPROVAL_CHANNEL
        job = StartJob(
            # Slack's trigger id is unique per invocation: a duplicate delivery is one run.
            run_id=new_run_id(seed=command.trigger_id),
            agent=agent,
            task=task,
            conversation=Conversation(
                channel=command.channel_id,
                requester=command.user_id,
                requester_external=admission.external,
                reply_url=command.response_url,
                direct=direct,
            ),
            requested_at=time.time(),
        )
        try:
            await self.queue.enqueue(
                job.job_id, job.payload(), run_id=job.run_id, version=job.version
            )
        except NotReplicated as error:
            log.warning("run %s: enqueued, not confirmed: %s", job.run_id, error)
            return messages.RUN_NOT_CONFIRMED
        except RedisError:
            log.warning("run %s not started: job queue unreachable", job.run_id)
            return messages.QUEUE_UNAVAILABLE
        log.info("run %s: enqueued for %s (%s)", job.run_id, command.user_id, agent)
        return messages.command_starting(agent)

    async def _mcp(self) -> dict[str, list[tuple[str, str]]] | None:
        if self.mcp_listings is None:
            return None
        try:
            listings = await self.mcp_listings.read()
        except RedisError:
            return None  # help still answers, without the MCP tools
        return {
            agent: [(info.tool, info.server) for info in listing.tools]
            for agent, listing in listings.items()
        }

    async def _audit(self, command: str, what: str, channel: str) -> str:
        """One run's history (only if it ran here), this channel's last `what` events, or (with
        nothing) this channel's events of the last hour."""
        try:
            if _IS_RUN_ID.match(what):
                entries = await self.audit.for_run(what)
                if not any(entry.channel == channel for entry in entries):
                    return audit_messages.audit_no_run(what)
                return audit_messages.audit_listing(entries, f"run `{what}`")
            count = int(what) if what else command_words.AUDIT_MOST
            entries = await self.audit.recent(count, channel=channel)
        except RedisError:
            return messages.QUEUE_UNAVAILABLE
        if what:
            title = f"the last {len(entries)} events in this channel"
            return audit_messages.audit_listing(entries, title)
        since = time.time() - AUDIT_WINDOW_SECONDS
        hour = [entry for entry in entries if entry.at >= since]
        return audit_messages.audit_last_hour(
            command, hour, bool(entries), command_words.AUDIT_MOST
        )


async def _reply(ack: AsyncAck, text: str) -> None:
    """Answer only the person who typed the command."""
    await ack(response_type="ephemeral", text=text)
