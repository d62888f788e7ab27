"""The Bolt app of the web process: Slack's client and the listeners, wired once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import cast

import aiohttp
import redis.asyncio as aioredis
from slack_bolt.app.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_sdk.web.async_client import AsyncWebClient

from bot.home.routes import add_home_tab
from bot.home.watch import HomeWatch
from bot.listeners.answers import AnswerActions
from bot.listeners.approvals import ApprovalActions
from bot.listeners.batch import BatchActions
from bot.listeners.commands import AgentCommand
from bot.listeners.confirmations import ConfirmActions
from bot.listeners.direct_messages import DirectMessages
from bot.listeners.edits import EditActions
from bot.listeners.gate import ApprovalGate
from bot.listeners.grants import GrantActions
from bot.listeners.questions import QuestionActions
from bot.listeners.requesters import Requesters
from bot.listeners.routes import Listeners, add_catch_alls, add_listeners
from bot.listeners.stats import ChannelStatsAnswer
from bot.listeners.status import RunStatus
from bot.listeners.stops import StopActions
from bot.listeners.threads import ThreadReplies
from bot.listeners.workspace import ChannelMembershipEvents, GroupMembershipEvents
from bot.reporting.failovers import SlackLostDecisions
from bot.settings import Settings
from bot.slack.bot_token import BotToken
from bot.slack.channel_members import ChannelMembers
from bot.slack.client import CLICK_LOOKUP_SECONDS, directory_client
from bot.slack.directory import ApproverDirectory
from bot.slack.in_flight import InFlight
from bot.slack.members import WorkspaceMembers
from bot.web.installation import InstallationCheck
from bot.wiring import SlackParts, replication_for, slack_parts
from runtime.audit import AuditTrail, KeptArguments
from runtime.conversations import ThreadHistory
from runtime.db import Keys
from runtime.decisions import BatchRecorder, DecisionRecorder
from runtime.failover import AcknowledgedDecisions
from runtime.grants import GrantStore
from runtime.jobs import JobQueue
from runtime.mcp import McpListings, QuestionStore
from runtime.policy import Policy, parse_principals
from runtime.process import TaskSet
from runtime.registry import RegistryError, load_registry
from runtime.runs import LiveRuns
from runtime.stops import Principals, RunStopper

log = logging.getLogger(__name__)


def build_bolt(
    settings: Settings,
    *,
    redis: aioredis.Redis,
    home_redis: aioredis.Redis,
    session: aiohttp.ClientSession,
    agent_names: list[str],
    policy: Policy,
    tasks: TaskSet,
) -> WebSlack:
    """The Bolt app, the watcher that republishes Home tabs, and the token's check."""
    parts = slack_parts(settings, redis=redis, session=session)
    lookups = _click_lookups(settings, redis=redis, session=session)
    bot_token = BotToken(
        parts.client,
        links=parts.links,
        members=lookups.members,
        fix=Settings.fix("SLACK_BOT_TOKEN"),
    )
    bolt = _bolt_app(settings, parts.client, bot_token)
    bolt.use(InstallationCheck(members=lookups.members).middleware())
    in_flight = InFlight()
    listeners = _listeners(
        settings,
        redis=redis,
        parts=parts,
        lookups=lookups,
        agent_names=agent_names,
        policy=policy,
        tasks=tasks,
    )
    add_listeners(bolt, listeners)
    home_watch = add_home_tab(
        bolt,
        redis=home_redis,
        keys=Keys.of(settings),
        parts=parts,
        recorder=listeners.approvals.recorder,
        stops=listeners.stops,
        tasks=tasks,
        members=lookups.members,
        channels=lookups.channels,
        quick_approval_seconds=settings.quick_approval_seconds,
        publishes_per_minute=settings.home_publishes_per_minute,
        in_flight=in_flight,
        acknowledged=listeners.approvals.acknowledged,
    )
    channel_events = ChannelMembershipEvents(
        channels=lookups.channels, moved=home_watch.member_moved
    )
    add_catch_alls(bolt, listeners, channel_events)
    return WebSlack(
        bolt=bolt,
        home_watch=home_watch,
        bot_token=bot_token,
        in_flight=in_flight,
        acknowledged=listeners.approvals.acknowledged,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class WebSlack:
    bolt: AsyncApp
    home_watch: HomeWatch
    """Republishes Home tabs (`run_home_watch`)."""
    bot_token: BotToken
    """Checked once at start (`BotToken.check`), never inside a request."""
    in_flight: InFlight
    """The Slack requests being answered: the Home tabs are drawn between them."""
    acknowledged: AcknowledgedDecisions | None
    """Decisions told to people, for the process's watch of the Redis primary (None: a
    cluster, not watched)."""


def _bolt_app(settings: Settings, client: AsyncWebClient, bot_token: BotToken) -> AsyncApp:
    _ignore_bolts_unused_token_warning()
    return AsyncApp(
        # Bolt copies this client for each request (its base URL, session, retries) and takes
        # the token from `authorize`: without a token of its own it asks no `auth.test`.
        client=AsyncWebClient(
            base_url=client.base_url,
            session=client.session,
            timeout=client.timeout,
            retry_handlers=client.retry_handlers,
        ),
        authorize=_bolt_authorize(bot_token),
        signing_secret=settings.slack_signing_secret.get_secret_value(),
        # The acknowledgement leaves after the listener returns, i.e. after Redis has the
        # decision; nothing acknowledged can be lost to a restart.
        process_before_response=True,
    )


def _bolt_authorize(bot_token: BotToken) -> Callable[..., Awaitable[AuthorizeResult]]:
    # Bolt passes the arguments a function names (a method's `self` would be one of them), and
    # answers a None (a refused token) with its "not installed" message, though its type says
    # only AuthorizeResult.
    async def authorize(
        enterprise_id: str | None, team_id: str | None, user_id: str | None
    ) -> AuthorizeResult | None:
        return await bot_token.authorize(enterprise_id, team_id, user_id)

    return cast("Callable[..., Awaitable[AuthorizeResult]]", authorize)


@dataclass(frozen=True, kw_only=True, slots=True)
class _ClickLookups:
    """Who is in a group, who is in the workspace: asked inside Slack's 3 s, so their client
    never waits out a 429."""

    directory: ApproverDirectory
    members: WorkspaceMembers
    channels: ChannelMembers
    """Who is in a channel, for a Home-tab click on a call anyone there may decide."""


def _click_lookups(
    settings: Settings, *, redis: aioredis.Redis, session: aiohttp.ClientSession
) -> _ClickLookups:
    keys = Keys.of(settings)
    client = directory_client(
        token=settings.slack_bot_token.get_secret_value(),
        base_url=settings.effective_slack_api_url,
        session=session,
    )
    return _ClickLookups(
        directory=ApproverDirectory(redis, keys, client, lookup_seconds=CLICK_LOOKUP_SECONDS),
        members=WorkspaceMembers(redis, keys, client, lookup_seconds=CLICK_LOOKUP_SECONDS),
        channels=ChannelMembers(redis, keys, client, lookup_seconds=CLICK_LOOKUP_SECONDS),
    )


def _listeners(
    settings: Settings,
    *,
    redis: aioredis.Redis,
    parts: SlackParts,
    lookups: _ClickLookups,
    agent_names: list[str],
    policy: Policy,
    tasks: TaskSet,
) -> Listeners:
    keys = Keys.of(settings)
    replication = replication_for(settings, redis)
    client, members = parts.client, lookups.members
    outsiders_allowed = settings.external_deciders == "allow"
    history = ThreadHistory(
        redis=redis,
        keys=keys,
        ttl_seconds=settings.conversation_ttl_seconds,
        max_items=settings.conversation_max_items,
    )
    stops = StopActions(
        stopper=RunStopper(redis, keys, replication=replication),
        directory=lookups.directory,
        reporter=parts.reporter,
        client=client,
        tasks=tasks,
        admins=Principals.parse(parse_principals(settings.admins)),
        members=members,
        outsiders_allowed=outsiders_allowed,
        history=history,
    )
    recorder = DecisionRecorder(
        redis, keys, replication=replication, kept=KeptArguments.of(settings)
    )
    approvals = ApprovalActions(
        recorder=recorder,
        client=client,
        reporter=parts.reporter,
        gate=ApprovalGate(
            directory=lookups.directory,
            recorder=recorder,
            members=members,
            quick_approval_seconds=settings.quick_approval_seconds,
        ),
        tasks=tasks,
        acknowledged=_acknowledged(settings, redis, parts),
    )
    grants = GrantActions(
        actions=approvals,
        store=GrantStore(redis, keys, replication=replication),
        client=client,
        members=members,
        outsiders_allowed=outsiders_allowed,
    )
    requesters = Requesters(
        members=members, outsiders_allowed=settings.external_requesters == "allow"
    )
    command = AgentCommand(
        requesters=requesters,
        queue=JobQueue(redis, keys, replication=replication),
        audit=AuditTrail(redis, keys),
        agents=agent_names,
        stops=stops,
        statuses=RunStatus(live=LiveRuns(redis, keys), links=parts.links),
        mcp_listings=McpListings(redis, keys),
        grants=grants,
        stats=ChannelStatsAnswer(
            audit=AuditTrail(redis, keys), quick_approval_seconds=settings.quick_approval_seconds
        ),
        client=client,
        tasks=tasks,
        cards_have_a_channel=policy.names_a_card_channel,
    )
    threads = ThreadReplies(
        history=history,
        queue=command.queue,
        client=client,
        agents=agent_names,
        requesters=requesters,
    )
    return Listeners(
        command=command,
        approvals=approvals,
        grants=grants,
        edits=EditActions(actions=approvals, client=client, policy=policy),
        confirmations=ConfirmActions(actions=approvals, client=client),
        answers=AnswerActions(actions=approvals, client=client),
        stops=stops,
        groups=GroupMembershipEvents(directory=lookups.directory),
        batch=BatchActions(
            actions=approvals, batch=BatchRecorder(redis=redis, keys=keys, replication=replication)
        ),
        questions=QuestionActions(
            store=QuestionStore(redis, keys, kept=_kept(settings)),
            client=client,
            directory=lookups.directory,
            tasks=tasks,
        ),
        threads=threads,
        direct=DirectMessages(
            queue=command.queue,
            requesters=requesters,
            client=client,
            agents=agent_names,
            replies=threads,
            cards_have_a_channel=policy.names_a_card_channel,
            lines=_agent_lines(settings, agent_names),
        ),
    )


def _agent_lines(settings: Settings, agent_names: list[str]) -> dict[str, str]:
    """Each agent's one line (the Messages tab's suggested prompts), from the registry the
    process was started with; none when it cannot be read here."""
    try:
        lines = load_registry(settings.agents).lines
    except RegistryError:
        return {}
    return {name: lines.get(name, "") for name in agent_names}


def _kept(settings: Settings) -> KeptArguments:
    """What an answer's audit entry keeps of its values: what a call's keeps of arguments."""
    return KeptArguments(keep=settings.audit_args == "on", max_bytes=settings.audit_args_max_bytes)


def _acknowledged(
    settings: Settings, redis: aioredis.Redis, parts: SlackParts
) -> AcknowledgedDecisions | None:
    """Decisions told to people, looked for again after a Redis failover; not on a cluster,
    which fails over node by node by itself (`runtime.failover.watch.watch_for`)."""
    if settings.redis_cluster:
        return None
    report = SlackLostDecisions(parts.client, parts.directory, parts.reach)
    seeds = settings.redis_min_replicas == 0
    return AcknowledgedDecisions(redis, Keys.of(settings), report, seeds=seeds)


class _ClientGivenOnPurpose(logging.Filter):
    """Bolt reads `SLACK_BOT_TOKEN` from the environment even when it is given a client (it has
    no other way to be told "no token"), then warns that the token will be unused. We give it our
    client on purpose (its base URL, session and retry handlers); the warning says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _ignore_bolts_unused_token_warning() -> None:
    bolt_log = logging.getLogger(f"slack_bolt.{AsyncApp.__name__}")
    if not any(isinstance(f, _ClientGivenOnPurpose) for f in bolt_log.filters):
        bolt_log.addFilter(_ClientGivenOnPurpose())
