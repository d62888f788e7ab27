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

from bot.listeners.grants import GrantActions
from bot.listeners.status import RunStatus
from bot.listeners.stops import StopActions
from bot.slack.payloads import SlashCommand
from bot.words import audit as audit_messages
from bot.words import runs as messages
from runtime.audit.trail import AuditTrail
from runtime.db.replication import NotReplicated
from runtime.jobs.contracts import Conversation, StartJob, new_run_id
from runtime.jobs.queue import JobQueue
from runtime.mcp.listing import McpListings

log = logging.getLogger(__name__)

# `name: task` picks an agent when `name` is one word; anything else is a task.
_AGENT_PREFIX = re.compile(r"^\s*([A-Za-z0-9_.\-]{1,64})\s*:\s*(\S.*)$", re.DOTALL)
# `audit`, `audit 50` or `audit <run id>` (one word after it: `audit banana` is told what
# audit takes, never run as a task); "audit the logs" stays a task.
_AUDIT = re.compile(r"^audit(?:\s+(\S+))?$", re.IGNORECASE)
_RUN_ID = re.compile(r"^r[0-9a-f]{16}$")
# `stop <run id>` and its alias `cancel <run id>`; "stop the api" stays a task.
_STOP = re.compile(r"^(?:stop|cancel)(?:\s+(\S+))?$", re.IGNORECASE)
# `status` or `status <run id>`; "status of the api" stays a task.
_STATUS = re.compile(r"^status(?:\s+(r[0-9a-f]{16}))?$", re.IGNORECASE)
AUDIT_DEFAULT_COUNT = 20
AUDIT_MAX_COUNT = 100


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    kind: str  # "help", "audit", "stop", "status", "grants", "unknown_agent" or "task"
    agent: str = ""
    task: str = ""


def parse_command_text(text: str, agents: list[str]) -> ParsedCommand:
    stripped = text.strip()
    if stripped.lower() in ("", "help", "-h", "--help", "?"):
        return ParsedCommand("help")
    if stripped.lower() == "grants":
        return ParsedCommand("grants")
    stop = _STOP.match(stripped)
    if stop is not None and (stop.group(1) is None or _RUN_ID.match(stop.group(1))):
        return ParsedCommand("stop", task=stop.group(1) or "")
    status = _STATUS.match(stripped)
    if status is not None:
        return ParsedCommand("status", task=status.group(1) or "")
    audit = _AUDIT.match(stripped)
    if audit is not None:
        return ParsedCommand("audit", task=audit.group(1) or "")
    match = _AGENT_PREFIX.match(stripped)
    if match is None:
        return ParsedCommand("task", agents[0], stripped)
    name, task = match.group(1), match.group(2).strip()
    if name in agents:
        return ParsedCommand("task", name, task)
    if name.startswith(("http", "https")):  # a URL like https://… is a task, not an agent name
        return ParsedCommand("task", agents[0], stripped)
    return ParsedCommand("unknown_agent", name)


@dataclass(kw_only=True)
class AgentCommand:
    queue: JobQueue
    audit: AuditTrail
    agents: list[str]
    stops: StopActions
    statuses: RunStatus
    mcp_listings: McpListings | None = None
    """Where workers publish each agent's MCP tools; the web never connects MCP servers."""
    grants: GrantActions | None = None

    async def __call__(self, ack: AsyncAck, body: dict[str, Any]) -> None:
        try:
            command = SlashCommand.model_validate(body)
        except ValidationError:
            log.warning("slash command with an invalid payload refused")
            await _reply(ack, messages.BUTTON_INVALID)
            return
        parsed = parse_command_text(command.text, self.agents)
        if parsed.kind == "help":
            help_text = messages.command_help(command.command, self.agents, await self._mcp())
            await _reply(ack, help_text)
            return
        if parsed.kind == "stop":
            if not parsed.task:
                await _reply(ack, messages.stop_usage(command.command))
                return
            told = await self.stops.stop(
                parsed.task, command.user_id, command.user_name, where=command.channel_id
            )
            await _reply(ack, told or messages.STOP_REQUESTED)
            return
        if parsed.kind == "grants" and self.grants is not None:
            text, blocks = await self.grants.listing(command.channel_id)
            await ack(response_type="ephemeral", text=text, blocks=blocks or None)
            return
        if parsed.kind == "status":
            text = await self.statuses.answer(command.channel_id, command.user_id, parsed.task)
            await _reply(ack, text)
            return
        if parsed.kind == "audit":
            await _reply(ack, await self._audit(command.command, parsed.task, command.channel_id))
            return
        if parsed.kind == "unknown_agent":
            await _reply(
                ack, messages.command_unknown_agent(command.command, parsed.agent, self.agents)
            )
            return
        await _reply(ack, await self._start(command, parsed.agent, parsed.task))

    async def _start(self, command: SlashCommand, agent: str, task: str) -> str:
        """Enqueue a run; what to answer."""
        job = StartJob(
            # Slack's trigger id is unique per invocation: a duplicate delivery is one run.
            run_id=new_run_id(seed=command.trigger_id),
            agent=agent,
            task=task,
            conversation=Conversation(
                channel=command.channel_id,
                requester=command.user_id,
                reply_url=command.response_url,
            ),
            requested_at=time.time(),
        )
        try:
            await self.queue.enqueue(job.job_id, job.model_dump_json(), run_id=job.run_id)
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
        """This channel's recent events, or one run's history (only if it ran here)."""
        if what and not _RUN_ID.match(what) and not (what.isdecimal() and int(what) > 0):
            return audit_messages.audit_usage(command, what, self.agents[0], AUDIT_MAX_COUNT)
        try:
            if what.startswith("r"):
                entries = await self.audit.for_run(what)
                if not any(entry.channel == channel for entry in entries):
                    return audit_messages.audit_no_run(what)
                return audit_messages.audit_listing(entries, f"run `{what}`")
            count = min(int(what or AUDIT_DEFAULT_COUNT), AUDIT_MAX_COUNT)
            entries = await self.audit.recent(count, channel=channel)
        except RedisError:
            return messages.QUEUE_UNAVAILABLE
        return audit_messages.audit_listing(
            entries, f"the last {len(entries)} events in this channel"
        )


async def _reply(ack: AsyncAck, text: str) -> None:
    """Answer only the person who typed the command."""
    await ack(response_type="ephemeral", text=text)
