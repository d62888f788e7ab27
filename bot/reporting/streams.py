"""Each stretch of a run streams one message in its thread (Slack's `chat.startStream`,
`chat.appendStream`, `chat.stopStream`): the model's text as it is produced
(`runtime.reporter.Activity.text`, sent at most about once a second by the run's observer), and
a task per tool call of the stretch, `pending` when the model asks for it, `in_progress` while it
runs, `complete` or `error` with how it ended (a decided call's task links to its card); a call
that waits for a person is a task naming who can decide. The run's answer is still posted
whole at the end, as before.

The stream is stopped whenever the run waits for a person or ends, with the status message's
blocks at its foot (its buttons while calls wait; how it ended otherwise): from then on it is
an ordinary message, and the run's next stretch starts a new stream (the previous message then
says how each of its calls was decided, with a link to its card). When the run waits, the
stream is stopped only once the cards are posted (`cards_posted`), so that each waiting task
links to its card: a card's ts is known only once it is posted, and the status message must
come before the cards in the thread. A stream Slack has ended
(`message_not_in_streaming_state`, about five minutes after it started), that would grow too
long (`msg_too_long`: 12,000 characters), or whose text was withdrawn (a failed model call's,
asked again: a stream only appends) goes on as that ordinary message, redrawn by `chat.update`
with the stretch's text: no step and no word is lost. Any other error answer turns streaming
(and sessions) off for the process or for the run (`bot.reporting.sessions.AgentSessions.refused`),
and the run goes on with its status message.

The stream's id is the run's status message id, written where and when that id always was
(`runtime.record.store.RunStore.set_status`, or with the first card), marked `stream:` while
it streams: no write of its own. A waiting run's id is recorded with its first card, while
the stream is still open, and not written again once it is stopped (that would be a write of
its own, and a wait on the stop's path): so a `stream:` id may name a stream stopped already.
The worker whose stretch opens on a `stream:` id stops that stream first, unless this process
stopped it itself (as a lone worker has). When Slack says it was stopped already
(`message_not_in_streaming_state`), it was a waiting stretch's, and it is settled as any
previous stretch's message; when the stop takes, a worker was killed before it could stop its
stream (mid-stretch, or between posting the cards and the stop), and the stream ends with a
line saying the run moved on, each call just decided saying how. Others
(the web redrawing a waiting run's status after a click) draw on it as on any message, without
trying to stop it: it is almost always stopped already, and a stop refused after every click
would only spend Slack's allowance for stops.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from aiohttp import ClientError
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import Block
from slack_sdk.models.blocks.block_elements import UrlSourceElement
from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.reporting.sessions import REMEMBERED, AgentSessions
from bot.slack.directory import ApproverDirectory
from bot.slack.links import ThreadLinks
from bot.words import streams as words
from runtime.reporter import Activity, RunView, Task

log = logging.getLogger(__name__)

STREAM_PREFIX = "stream:"
GONE_ON = frozenset({"message_not_in_streaming_state", "msg_too_long", "message_not_found"})
"""Errors after which the stream's message goes on as an ordinary one."""
TASK_STATUSES = {
    "pending": "pending",
    "waiting": "pending",
    "running": "in_progress",
    "done": "complete",
    "error": "error",
}


class TextWithdrawn(Exception):
    """The model's text no longer begins with what was streamed (a failed attempt's text was
    withdrawn): a stream only appends, so the message goes on as an ordinary one."""


def plain(message_id: str | None) -> str | None:
    """The message's ts, whether it streams or not."""
    if message_id and message_id.startswith(STREAM_PREFIX):
        return message_id[len(STREAM_PREFIX) :]
    return message_id or None


class RunStreams:
    def __init__(
        self, client: AsyncWebClient, sessions: AgentSessions, directory: ApproverDirectory
    ) -> None:
        self._client = client
        self._sessions = sessions
        self._directory = directory
        self._open: dict[str, str] = {}
        """Run id -> the ts of the stream this process has open for it."""
        self._sent: dict[str, dict[str, tuple[str, str, str | None]]] = {}
        """Run id -> task id -> (state, note, card) as last streamed."""
        self._said: dict[str, str] = {}
        """Run id -> the model's text as streamed so far in its open stream."""
        self._stopped: OrderedDict[str, str] = OrderedDict()
        """Run id -> the ts of the waiting stretch's stream this process stopped once its cards
        were posted (its record still says `stream:`): the run's next stretch, resumed here,
        settles it without asking Slack first (a stopped stream never streams again); resumed
        by another process, or forgotten (the oldest past `REMEMBERED`), it asks."""
        self._team: str | None = None
        self._links = ThreadLinks(client)

    async def show(
        self, run: RunView, message_id: str | None, activity: Activity, foot: Sequence[Block]
    ) -> tuple[str | None, bool]:
        """Stream `activity`: the message id to keep (`stream:<ts>` while it streams) and True;
        or, when it is not streamed, the message to draw the status message on (None: a new
        one) and False. `foot`: the status message's blocks, left at the foot of a stopped
        stream. A waiting run whose cards are posted next (`Activity.cards_follow`) keeps its
        stream open for them (`cards_posted`): started now if it has not been (before the
        cards, so that it comes first in the thread), else nothing is sent (its stop, a moment
        later, carries what changed)."""
        run_id = run.run_id
        if not self._sessions.on_for(run):
            await self._abandon(run)
            return plain(message_id), False
        ours = self._open.get(run_id)
        if ours is None and not await self._streams_anew(run, message_id, activity):
            return plain(message_id), False
        method = "chat.startStream" if ours is None else "chat.appendStream"
        for_cards = activity.state == "waiting" and activity.cards_follow
        try:
            if ours is None:
                ours = await self._start(run, activity)
            elif activity.state == "working":
                held = [*self._new_text(run, activity.text), *await self._chunks(run, activity)]
                if held:
                    await self._client.chat_appendStream(
                        channel=run.conversation.channel, ts=ours, chunks=held
                    )
            if activity.state == "working" or for_cards:
                return STREAM_PREFIX + ours, True
            method = "chat.stopStream"
            return await self._stop_with(run, ours, activity, foot), True
        except (TextWithdrawn, SlackApiError, ClientError, TimeoutError) as error:
            return await self._goes_on(run, ours, plain(message_id), method, error), False

    async def cards_posted(
        self, run: RunView, activity: Activity, foot: Sequence[Block]
    ) -> tuple[str | None, bool]:
        """The cards of a waiting run are posted (each waiting task of `activity` has its
        `card`): the stream `show` left open for them is stopped, each task linking to its
        card, with `foot`. Returns what `show` does; None and False when no stream was left
        open (streaming off, or it went on as a message): nothing was sent."""
        ours = self._open.get(run.run_id)
        if ours is None:
            return None, False
        try:
            await self._stop_with(run, ours, activity, foot)
            self._stopped[run.run_id] = ours
            while len(self._stopped) > REMEMBERED:
                self._stopped.popitem(last=False)
            return ours, True
        except (TextWithdrawn, SlackApiError, ClientError, TimeoutError) as error:
            return await self._goes_on(run, ours, ours, "chat.stopStream", error), False

    async def _stop_with(
        self, run: RunView, ours: str, activity: Activity, foot: Sequence[Block]
    ) -> str:
        """Stop the stream `ours` with what changed of `activity`, `foot` below; its ts."""
        held = [*self._new_text(run, activity.text), *await self._chunks(run, activity)]
        self._forget(run.run_id)  # stopped, or gone: either way no longer this process's
        await self._client.chat_stopStream(
            channel=run.conversation.channel, ts=ours, chunks=held or None, blocks=list(foot)
        )
        return ours

    async def _goes_on(
        self, run: RunView, ours: str | None, message_id: str | None, method: str, error: Exception
    ) -> str | None:
        """After `error`, the stream `ours` (or, none started, the status message `message_id`;
        None: a new one) goes on as an ordinary message, which is returned; streaming stays
        on, or goes off for the run or for the process (`bot.reporting.sessions`)."""
        if isinstance(error, SlackApiError):
            code = str(error.response.get("error"))
            if code not in GONE_ON:
                self._sessions.refused(run, method, error)
        elif isinstance(error, TextWithdrawn):
            code = "a failed model call's text withdrawn"
        else:
            code = type(error).__name__
            self._sessions.refused(run, method, None, reason=code)
        self._forget(run.run_id)
        if ours is not None and code != "message_not_in_streaming_state":
            await self._stop(run, ours)
        log.info("run %s: its stream goes on as a message (%s: %s)", run.run_id, method, code)
        return ours or message_id

    async def _streams_anew(self, run: RunView, message_id: str | None, activity: Activity) -> bool:
        """Whether the run, with no stream of this process open, starts one: a stretch this
        process began does (after stopping a stream another worker left open, or settling the
        previous stretch's message, a `stream:` one too once Slack says it was stopped);
        otherwise (the web redrawing a waiting run's status, or a stretch whose stream went on
        as a message) that message is drawn as before, a `stream:` id's too: the waiting
        run's stream was stopped once its cards were posted."""
        if not activity.opens_stretch:
            return False
        if message_id and message_id.startswith(STREAM_PREFIX):
            ts = plain(message_id) or ""
            stopped = self._stopped.pop(run.run_id, None) == ts
            if stopped or await self._taken_over(run, ts, activity):
                await self._settle(run, ts, activity.tasks)
        elif message_id:
            await self._settle(run, message_id, activity.tasks)
        return True

    async def _start(self, run: RunView, activity: Activity) -> str:
        conversation = run.conversation
        assert conversation.thread is not None
        self._said[run.run_id] = ""
        chunks = [*self._new_text(run, activity.text), *await self._chunks(run, activity)]
        response = await self._client.chat_startStream(
            channel=conversation.channel,
            thread_ts=conversation.thread,
            recipient_user_id=conversation.requester,
            recipient_team_id=await self._team_id(),
            chunks=chunks or None,
        )
        ts = str(response["ts"])
        self._open[run.run_id] = ts
        return ts

    async def _taken_over(self, run: RunView, ts: str, activity: Activity) -> bool:
        """Stop the stream the run's record names, which this process does not have open: True
        when Slack says it was stopped already (a waiting stretch's, stopped once its cards
        were posted; or one Slack ended), for it to be settled. A stop that takes ends a stream
        whose worker was killed before it could stop it: with a line saying the run moved on,
        and how each call just decided ended (a waiting stretch's stream, left open between
        its cards and its stop, says so too)."""
        decided = [t for t in activity.tasks if t.note]
        self._sent.pop(run.run_id, None)
        try:
            await self._client.chat_stopStream(
                channel=run.conversation.channel,
                ts=ts,
                markdown_text=words.MOVED_ON,
                chunks=await self._chunks(run, replace(activity, tasks=tuple(decided))) or None,
            )
        except SlackApiError as error:
            code = error.response.get("error")
            if code == "message_not_in_streaming_state":
                return True
            log.info("run %s: its former stream not stopped (%s)", run.run_id, code)
        except (ClientError, TimeoutError):
            log.info("run %s: its former stream not stopped (Slack unreachable)", run.run_id)
        finally:
            self._sent.pop(run.run_id, None)
        return False

    async def _settle(self, run: RunView, ts: str, tasks: Sequence[Task]) -> None:
        """The previous stretch's message no longer offers what its calls waited for: it says
        how each ended (`tasks`: the calls just decided), with a link to its card."""
        decided = [t for t in tasks if t.note]
        names = await self._names(decided)
        links = {t.id: link for t in decided if (link := await self._card_link(run, t))}
        try:
            await self._client.chat_update(
                channel=run.conversation.channel,
                ts=ts,
                text=words.stretch_settled(decided, names, links),
                blocks=[],
            )
        except (SlackApiError, ClientError, TimeoutError) as error:
            log.info("run %s: the previous stretch's message not settled: %s", run.run_id, error)

    async def _stop(self, run: RunView, ts: str) -> None:
        """A stream that goes on as a message is stopped first (Slack may have ended it)."""
        try:
            await self._client.chat_stopStream(channel=run.conversation.channel, ts=ts)
        except (SlackApiError, ClientError, TimeoutError):
            log.info("run %s: its stream not stopped before going on as a message", run.run_id)

    async def _abandon(self, run: RunView) -> None:
        """Streaming went off while this run streamed: its stream is stopped, not left open."""
        ts = self._open.get(run.run_id)
        if ts is None:
            return
        self._forget(run.run_id)
        try:
            await self._client.chat_stopStream(channel=run.conversation.channel, ts=ts)
        except (SlackApiError, ClientError, TimeoutError):
            log.info("run %s: its stream not stopped as streaming went off", run.run_id)

    def _forget(self, run_id: str) -> None:
        self._open.pop(run_id, None)
        self._sent.pop(run_id, None)
        self._said.pop(run_id, None)

    def _new_text(self, run: RunView, text: str) -> list[Chunk]:
        """The model's text not streamed yet, as one Markdown chunk (none: nothing new).
        Raises `TextWithdrawn` when the text no longer begins with what was streamed."""
        said = self._said.get(run.run_id, "")
        if not text.startswith(said):
            raise TextWithdrawn
        if len(text) == len(said):
            return []
        self._said[run.run_id] = text
        return [MarkdownTextChunk(text=words.streamed_text(text[len(said) :]))]

    async def _chunks(self, run: RunView, activity: Activity) -> list[Chunk]:
        """The tasks that changed since last streamed, as Slack's task updates."""
        tasks: Sequence[Task] = activity.tasks
        sent = self._sent.setdefault(run.run_id, {})
        changed = [t for t in tasks if sent.get(t.id) != (t.state, t.note, t.card)]
        if not changed:
            return []
        names = await self._names(changed)
        chunks: list[Chunk] = []
        for task in changed:
            sent[task.id] = (task.state, task.note, task.card)
            outcome = words.task_outcome(task, names)
            link = await self._card_link(run, task)
            chunks.append(
                TaskUpdateChunk(
                    id=task.id,
                    title=words.task_title(task, names),
                    status=TASK_STATUSES.get(task.state, "pending"),
                    output=outcome if task.state == "done" else None,
                    details=outcome if task.state == "error" else None,
                    sources=[UrlSourceElement(url=link, text=words.CARD_LINK)] if link else None,
                )
            )
        return chunks

    async def _names(self, tasks: Sequence[Task]) -> Mapping[str, str]:
        """The names of the people the tasks name (who may decide, who decided)."""
        people = {p for t in tasks for p in t.deciders}
        people |= {who for t in tasks if (who := t.note.partition(":")[2])}
        return await self._directory.names(sorted(people)) if people else {}

    async def _card_link(self, run: RunView, task: Task) -> str | None:
        """The permalink of the card that asked for `task`'s call, built from its channel and
        ts (no call per card: the workspace URL is asked once); None without a card."""
        if task.card is None:
            return None
        if task.card_channel is not None:  # the approvers' channel: not in the run's thread
            return await self._links.thread(task.card_channel, task.card)
        link = await self._links.thread(run.conversation.channel, task.card)
        if link is None or run.conversation.thread is None:
            return link
        return f"{link}?thread_ts={run.conversation.thread}&cid={run.conversation.channel}"

    async def _team_id(self) -> str:
        """The workspace a channel's stream is addressed in (Slack requires it with the
        recipient), asked of Slack once."""
        if self._team is None:
            answer = await self._client.auth_test()
            self._links.learn(answer.get("url"))
            self._team = str(answer["team_id"])
        return self._team
