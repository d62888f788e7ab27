"""Slack's surface for agents, in the stand-in Slack: sessions and streamed messages.

What Countersign may call, with the arguments `slack_sdk` 3.48 sends (`AsyncWebClient`):
`agents.sessions.setStatus` (`channel_id`, `status`, `thread_ts`, `title`, `initiator_user_id`),
`agents.sessions.rename` (`channel_id`, `title`, `thread_ts`), and the streams'
`chat.startStream` (`channel`, `thread_ts`, `markdown_text`, `chunks`, `recipient_user_id`,
`recipient_team_id`, `task_display_mode`), `chat.appendStream` (`channel`, `ts`,
`markdown_text`, `chunks`) and `chat.stopStream` (`channel`, `ts`, `markdown_text`, `chunks`,
`blocks`, `session_status`), and the Messages tab's `assistant.threads.setSuggestedPrompts`
(`channel_id`, `prompts`, `title`, `thread_ts`).

Checked as Slack documents them: a required argument missing is `invalid_arguments`; a session
status other than `active`, `processing`, `suspended`, `closed` is `invalid_arguments`; a chunk
that `slack_sdk`'s `Chunk.parse` does not read as sent is `invalid_chunks`; a stream outside a
direct message needs `recipient_user_id` and `recipient_team_id`
(`missing_recipient_user_id`, `missing_recipient_team_id`); a stream Slack has ended (stopped,
or `STREAM_SECONDS` after it started) answers `message_not_in_streaming_state`; a streamed
message past `STREAM_TEXT_LIMIT` characters is `msg_too_long`. Once stopped (or ended), the
message is an ordinary one: `chat.update` may rewrite it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk

SESSION_STATUSES = frozenset({"active", "processing", "suspended", "closed"})
TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
STREAM_SECONDS = 300.0
"""Slack ends a stream about five minutes after it started."""
STREAM_TEXT_LIMIT = 12_000
"""Characters of Markdown a streamed message holds (Slack's limit for `markdown_text`); counted
over the whole stream here, the stricter reading, so that a bot that stays under it is safe."""
AGENT_METHODS = frozenset(
    {
        "agents.sessions.setStatus",
        "agents.sessions.rename",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "assistant.threads.setSuggestedPrompts",
    }
)
PROMPTS_MOST = 4
"""Suggested prompts Slack shows at most."""


class Streamed(Protocol):
    """A message of the stand-in Slack, as a stream writes it."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    thread_ts: str | None
    tasks: list[dict[str, Any]]
    streaming: bool
    streamed: bool
    recipient: str | None


@dataclass
class Session:
    """A thread's agent session: its status now, every status it had, its title."""

    channel: str
    thread_ts: str | None
    status: str
    title: str | None = None
    statuses: list[str] = field(default_factory=list)
    initiator: str | None = None


@dataclass
class _Stream:
    started: float
    length: int = 0
    stopped: bool = False


class AgentSurface:
    def __init__(
        self,
        *,
        post: Callable[[str, str, str | None], Streamed],
        find: Callable[[str], Streamed | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`post(channel, thread_ts, recipient)`: a new (empty) message in the thread;
        `find(ts)`: the message at `ts`, if any."""
        self._post = post
        self._find = find
        self.clock = clock
        self.stream_seconds = STREAM_SECONDS
        """How long a stream lasts; a test shortens it to see one end."""
        self.sessions: dict[tuple[str, str | None], Session] = {}
        self.prompts: dict[str, dict[str, Any]] = {}
        """The suggested prompts of each person's Messages tab (its direct message's id):
        `title` and `prompts` as last set."""
        self._streams: dict[str, _Stream] = {}

    def session(self, channel: str, thread_ts: str | None) -> Session | None:
        return self.sessions.get((channel, thread_ts))

    def streaming(self, ts: str) -> bool:
        """Whether the message at `ts` is a stream Slack still takes appends to."""
        stream = self._streams.get(ts)
        return stream is not None and self._open(stream)

    def answer(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        if method == "agents.sessions.setStatus":
            return self._set_status(args)
        if method == "agents.sessions.rename":
            return self._rename(args)
        if method == "chat.startStream":
            return self._start(args)
        if method == "assistant.threads.setSuggestedPrompts":
            return self._suggest(args)
        if method == "chat.appendStream":
            return self._append(args, stop=False)
        return self._append(args, stop=True)

    # --- sessions -------------------------------------------------------------------------------

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, status = args.get("channel_id"), args.get("status")
        if not channel or not status:
            return _error("invalid_arguments")
        if status not in SESSION_STATUSES:
            return _error("invalid_arguments")
        self._to(str(channel), args.get("thread_ts"), str(status), args.get("title"))
        session = self.sessions[(str(channel), args.get("thread_ts"))]
        session.initiator = args.get("initiator_user_id") or session.initiator
        return {"ok": True}

    def _rename(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, title = args.get("channel_id"), args.get("title")
        if not channel or not title:
            return _error("invalid_arguments")
        key = (str(channel), args.get("thread_ts"))
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(key[0], key[1], "active")
        session.title = str(title)
        return {"ok": True}

    def _to(self, channel: str, thread_ts: str | None, status: str, title: Any = None) -> None:
        key = (channel, thread_ts)
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(channel, thread_ts, status)
        session.status = status
        session.statuses.append(status)
        if title:
            session.title = str(title)

    def _suggest(self, args: dict[str, Any]) -> dict[str, Any]:
        """`assistant.threads.setSuggestedPrompts` of an `agent_view` app: for the Messages
        tab of the direct message `channel_id`. A `thread_ts` is the legacy assistant's, and
        Slack silently drops such a call for an agent: answered `ok`, nothing shown."""
        channel, prompts = args.get("channel_id"), args.get("prompts")
        if not channel or not isinstance(prompts, list) or not prompts:
            return _error("invalid_arguments")
        if not str(channel).startswith("D"):
            return _error("channel_not_found")
        if len(prompts) > PROMPTS_MOST or not all(_is_prompt(p) for p in prompts):
            return _error("invalid_arguments")
        if args.get("thread_ts") is None:
            self.prompts[str(channel)] = {"title": args.get("title"), "prompts": list(prompts)}
        return {"ok": True}

    # --- streams --------------------------------------------------------------------------------

    def _start(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = args.get("channel"), args.get("thread_ts")
        if not channel or not thread_ts:
            return _error("invalid_arguments")
        channel = str(channel)
        if not channel.startswith("D"):
            for needed in ("recipient_user_id", "recipient_team_id"):
                if not args.get(needed):
                    return _error(f"missing_{needed}")
        chunks = _chunks(args)
        if isinstance(chunks, str):
            return _error(chunks)
        added = _text_length(args, chunks)
        if added > STREAM_TEXT_LIMIT:
            return _error("msg_too_long")
        message = self._post(channel, str(thread_ts), args.get("recipient_user_id"))
        message.streaming = message.streamed = True
        self._streams[message.ts] = _Stream(started=self.clock(), length=added)
        _write(message, args, chunks)
        return {"ok": True, "channel": channel, "ts": message.ts}

    def _append(self, args: dict[str, Any], *, stop: bool) -> dict[str, Any]:
        channel, ts = args.get("channel"), args.get("ts")
        if not channel or not ts:
            return _error("invalid_arguments")
        message = self._find(str(ts))
        if message is None or message.channel != channel:
            return _error("message_not_found")
        stream = self._streams.get(message.ts)
        if stream is None or not self._open(stream):
            message.streaming = False
            return _error("message_not_in_streaming_state")
        status = args.get("session_status")
        if stop and status is not None and status not in SESSION_STATUSES:
            return _error("invalid_arguments")
        chunks = _chunks(args)
        if isinstance(chunks, str):
            return _error(chunks)
        added = _text_length(args, chunks)
        if stream.length + added > STREAM_TEXT_LIMIT:
            return _error("msg_too_long")
        stream.length += added
        _write(message, args, chunks)
        if stop:
            stream.stopped = True
            message.streaming = False
            blocks = args.get("blocks")
            if blocks:
                message.blocks = list(blocks)
            if status is not None:
                self._to(message.channel, message.thread_ts, str(status))
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _open(self, stream: _Stream) -> bool:
        return not stream.stopped and self.clock() - stream.started < self.stream_seconds


def _is_prompt(prompt: object) -> bool:
    """A prompt as Slack takes it: a `title` and a `message`, both non-empty strings."""
    return (
        isinstance(prompt, dict)
        and set(prompt) == {"title", "message"}
        and all(isinstance(v, str) and v.strip() for v in prompt.values())
    )


def _error(code: str) -> dict[str, Any]:
    return {"ok": False, "error": code}


def _chunks(args: dict[str, Any]) -> list[Chunk] | str:
    """The call's chunks as `slack_sdk` reads them, or the error Slack answers."""
    raw = args.get("chunks") or []
    if not isinstance(raw, list):
        return "invalid_chunks"
    parsed = []
    for sent in raw:
        if not isinstance(sent, dict):
            return "invalid_chunks"
        try:
            chunk = Chunk.parse(sent)
            if chunk is None or chunk.to_dict() != sent:
                return "invalid_chunks"
        except (SlackObjectFormationError, TypeError, ValueError, AttributeError):
            return "invalid_chunks"
        if isinstance(chunk, TaskUpdateChunk) and chunk.status not in TASK_STATUSES:
            return "invalid_chunks"
        parsed.append(chunk)
    return parsed


def _text_length(args: dict[str, Any], chunks: list[Chunk]) -> int:
    text = len(str(args.get("markdown_text") or ""))
    return text + sum(len(c.text) for c in chunks if isinstance(c, MarkdownTextChunk))


def _write(message: Streamed, args: dict[str, Any], chunks: list[Chunk]) -> None:
    """Add what the call streams: its text to the message's, each task update to its task."""
    message.text += str(args.get("markdown_text") or "")
    for chunk in chunks:
        if isinstance(chunk, MarkdownTextChunk):
            message.text += chunk.text
        elif isinstance(chunk, TaskUpdateChunk):
            update = chunk.to_dict()
            for task in message.tasks:
                if task["id"] == update["id"]:
                    task.update(update)
                    break
            else:
                message.tasks.append(update)
