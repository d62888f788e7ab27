"""The stand-in Slack speaks Slack's surface for agents: sessions and streamed messages, with
Slack's checks and errors, through the real `slack_sdk` client (and its `AsyncChatStream`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import AlertBlock
from slack_sdk.models.messages.chunk import MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.console.agent_surface import STREAM_TEXT_LIMIT
from tests.support.fake_slack import AGENT_ERRORS, FakeSlack

CHANNEL = "CDEMO"


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest.fixture
def client(slack: FakeSlack) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=slack.api_url)


async def thread(client: AsyncWebClient) -> str:
    return str((await client.chat_postMessage(channel=CHANNEL, text="task"))["ts"])


async def error_of(call: object) -> str:
    with pytest.raises(SlackApiError) as raised:
        await call  # type: ignore[misc]
    return str(raised.value.response["error"])


async def test_a_session_goes_through_its_statuses_and_takes_a_title(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(client)
    for status in ("processing", "suspended", "processing", "closed"):
        await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status=status)
    await client.agents_sessions_rename(channel_id=CHANNEL, thread_ts=ts, title="delete u-100")
    session = slack.agents.session(CHANNEL, ts)
    assert session is not None
    assert session.statuses == ["processing", "suspended", "processing", "closed"]
    assert (session.status, session.title) == ("closed", "delete u-100")

    bad = client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="thinking")
    assert await error_of(bad) == "invalid_arguments"
    assert await error_of(client.api_call("agents.sessions.setStatus", json={})) == (
        "invalid_arguments"
    )
    assert await error_of(client.api_call("agents.sessions.rename", json={"channel_id": "C"})) == (
        "invalid_arguments"
    )


async def test_a_stream_builds_one_message_of_text_and_tasks(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(client)
    stream = await client.chat_stream(
        channel=CHANNEL, thread_ts=ts, recipient_user_id="UALICE", recipient_team_id="T1"
    )
    await stream.append(markdown_text="Looking ", chunks=[])
    await stream.append(
        chunks=[TaskUpdateChunk(id="c1", title="delete_user", status="pending")],
    )
    await stream.append(
        markdown_text="it up.",
        chunks=[TaskUpdateChunk(id="c1", title="delete_user", status="complete", output="ok")],
    )
    assert stream.ts is not None and slack.agents.streaming(stream.ts)
    alert = AlertBlock(text="Stopped by @bob", level="error")
    await stream.stop(blocks=[alert], session_status="closed")

    message = slack.messages[stream.ts]
    assert (message.thread_ts, message.recipient, message.streaming) == (ts, "UALICE", False)
    assert message.text == "Looking it up."
    assert [(t["id"], t["status"], t.get("output")) for t in message.tasks] == [
        ("c1", "complete", "ok")
    ]
    assert message.blocks == [alert.to_dict()]
    session = slack.agents.session(CHANNEL, ts)
    assert session is not None and session.status == "closed"
    slack.assert_nothing_refused()

    # Once stopped it is an ordinary message: no more appends, but chat.update rewrites it.
    again = client.chat_appendStream(channel=CHANNEL, ts=stream.ts, markdown_text="more")
    assert await error_of(again) == "message_not_in_streaming_state"
    await client.chat_update(channel=CHANNEL, ts=stream.ts, text="rewritten")
    assert slack.messages[stream.ts].text == "rewritten"


async def test_slack_checks_a_streams_arguments(slack: FakeSlack, client: AsyncWebClient) -> None:
    ts = await thread(client)
    in_channel = client.chat_startStream(channel=CHANNEL, thread_ts=ts, markdown_text="x")
    assert await error_of(in_channel) == "missing_recipient_user_id"
    no_team = client.chat_startStream(
        channel=CHANNEL, thread_ts=ts, markdown_text="x", recipient_user_id="UALICE"
    )
    assert await error_of(no_team) == "missing_recipient_team_id"
    # A direct message needs no recipient.
    await client.chat_startStream(channel="DUALICE", thread_ts=ts, markdown_text="x")
    no_thread = client.api_call("chat.startStream", json={"channel": "DUALICE"})
    assert await error_of(no_thread) == "invalid_arguments"
    bad_task = client.chat_startStream(
        channel="DUALICE",
        thread_ts=ts,
        chunks=[{"type": "task_update", "id": "1", "title": "t", "status": "thinking"}],
    )
    assert await error_of(bad_task) == "invalid_chunks"
    unknown = client.chat_startStream(
        channel="DUALICE", thread_ts=ts, chunks=[{"type": "sparkles", "text": "x"}]
    )
    assert await error_of(unknown) == "invalid_chunks"
    missing = client.chat_appendStream(channel="DUALICE", ts="1.000001", markdown_text="x")
    assert await error_of(missing) == "message_not_found"


async def test_a_stream_ends_five_minutes_after_it_started(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    now = [1000.0]
    slack.agents.clock = lambda: now[0]
    ts = await thread(client)
    started = await client.chat_startStream(channel="DUALICE", thread_ts=ts, markdown_text="a")
    stream_ts = str(started["ts"])
    now[0] += 299
    await client.chat_appendStream(channel="DUALICE", ts=stream_ts, markdown_text="b")
    now[0] += 2
    late = client.chat_appendStream(channel="DUALICE", ts=stream_ts, markdown_text="c")
    assert await error_of(late) == "message_not_in_streaming_state"
    assert await error_of(client.chat_stopStream(channel="DUALICE", ts=stream_ts)) == (
        "message_not_in_streaming_state"
    )
    assert slack.messages[stream_ts].text == "ab"


async def test_a_stream_holds_twelve_thousand_characters(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    ts = await thread(client)
    too_long = client.chat_startStream(
        channel="DUALICE", thread_ts=ts, markdown_text="x" * (STREAM_TEXT_LIMIT + 1)
    )
    assert await error_of(too_long) == "msg_too_long"
    started = await client.chat_startStream(
        channel="DUALICE", thread_ts=ts, chunks=[MarkdownTextChunk(text="x" * 11_000)]
    )
    over = client.chat_appendStream(
        channel="DUALICE", ts=str(started["ts"]), markdown_text="y" * 1_001
    )
    assert await error_of(over) == "msg_too_long"
    await client.chat_appendStream(channel="DUALICE", ts=str(started["ts"]), markdown_text="y")


@pytest.mark.parametrize("error", AGENT_ERRORS)
async def test_the_fake_answers_each_error_a_workspace_without_them_gives(
    slack: FakeSlack, error: str
) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)  # no retry handlers
    slack.refuse(("agents.sessions.setStatus", "chat.startStream"), error)
    ts = await thread(client)
    with pytest.raises(SlackApiError) as raised:
        await client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=ts, status="active")
    assert raised.value.response["error"] == error
    if error == "missing_scope":
        assert raised.value.response["needed"] == "assistant:write"
    if error == "ratelimited":
        assert raised.value.response.status_code == 429
        assert raised.value.response.headers["Retry-After"] == "0"
    start = client.chat_startStream(channel="DUALICE", thread_ts=ts, markdown_text="x")
    assert await error_of(start) == error
    assert slack.agents.session(CHANNEL, ts) is None


async def test_the_messages_tabs_suggested_prompts_are_checked_as_slack_checks_them(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    prompts = [{"title": "ops: restarts services", "message": "ops: "}]
    await client.assistant_threads_setSuggestedPrompts(
        channel_id="DUALICE", title="Start", prompts=prompts
    )
    assert slack.agents.prompts["DUALICE"] == {"title": "Start", "prompts": prompts}
    too_many = prompts * 5
    no_message = [{"title": "ops"}]
    assert (
        await error_of(
            client.assistant_threads_setSuggestedPrompts(channel_id="DUALICE", prompts=too_many)
        )
        == "invalid_arguments"
    )
    assert (
        await error_of(
            client.assistant_threads_setSuggestedPrompts(channel_id="DUALICE", prompts=no_message)
        )
        == "invalid_arguments"
    )
    assert (
        await error_of(
            client.assistant_threads_setSuggestedPrompts(channel_id=CHANNEL, prompts=prompts)
        )
        == "channel_not_found"
    )
    # With a thread_ts (the legacy assistant's), an agent's call silently does nothing.
    await client.assistant_threads_setSuggestedPrompts(
        channel_id="DUALICE", thread_ts="1.000001", prompts=[{"title": "x", "message": "x"}]
    )
    assert slack.agents.prompts["DUALICE"]["prompts"] == prompts
    slack.refuse("assistant.threads.setSuggestedPrompts", "missing_scope")
    refused = client.assistant_threads_setSuggestedPrompts(channel_id="DUALICE", prompts=prompts)
    assert await error_of(refused) == "missing_scope"
