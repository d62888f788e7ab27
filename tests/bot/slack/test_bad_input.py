"""Bad input at the edges gets a clear answer, never a loop: a signed request, a Socket Mode
envelope or a stored record nested too deep or too large is answered 4xx (or acknowledged) with
one log line, and the bot goes on answering what comes next.

Python's JSON parser recurses: a signed body nested 100,000 deep raised `RecursionError` inside
the web's own check and Slack got a 500 with a traceback (and, for an event, sent it again).
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import AsyncIterator
from urllib.parse import parse_qsl, urlencode

import pytest

from bot.console.slack_payloads import new_trigger, slash_command_form
from bot.slack.bodies import MAX_BODY_CHARS, MAX_BODY_DEPTH
from runtime.record.layout import ENVELOPE
from tests.bot.slack.test_socket_mode import APP_TOKEN, SocketSlack
from tests.support import agents
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer
from tests.support.slack_requests import signature_headers

DEEP = 100_000


def deep_event() -> str:
    """An Events API callback whose event nests `DEEP` arrays deep."""
    nested = "[" * DEEP + "]" * DEEP
    return (
        '{"type": "event_callback", "team_id": "T0001", "api_app_id": "A0001", '
        '"event_id": "Ev1", "event_time": 1, '
        '"event": {"type": "app_mention", "user": "UALICE", "channel": "CGENERAL", '
        f'"ts": "1.000001", "text": "hi", "blocks": {nested}}}}}'
    )


def refusals(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


async def test_a_signed_request_nested_too_deep_is_400_with_one_log_line(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    body = deep_event()
    headers = {**signature_headers(bot.sender.secret, body), "Content-Type": "application/json"}
    status, _ = await bot.sender.post(body, headers)
    assert status == 400
    # The same inside an interaction's form field.
    form = urlencode({"payload": '{"type": "block_actions", "x": ' + "[" * DEEP + "]" * DEEP})
    status, _ = await bot.sender.post(form)
    assert status == 400
    lines = refusals(caplog, "malformed body refused")
    assert lines == [
        f"signed request with a malformed body refused: nested {DEEP + 2} deep, "
        f"more than {MAX_BODY_DEPTH}",
        f"signed request with a malformed body refused: nested {DEEP + 1} deep, "
        f"more than {MAX_BODY_DEPTH}",
    ]
    assert not [r for r in caplog.records if r.exc_info], "no traceback"

    # Brackets inside strings are words, not nesting: a task full of them still runs.
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100 " + "[" * 500)
    assert root.text.startswith("<@UALICE> asked")


async def test_a_signed_request_larger_than_a_mebibyte_is_413_with_one_log_line(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    body = json.dumps(
        {"type": "event_callback", "event": {"type": "x", "text": "x" * MAX_BODY_CHARS}}
    )
    headers = {**signature_headers(bot.sender.secret, body), "Content-Type": "application/json"}
    async with bot.sender.session.post(
        bot.sender.url, data=io.BytesIO(body.encode()), headers=headers
    ) as response:
        assert response.status == 413
    assert refusals(caplog, "request refused") == [
        f"request refused: larger than {MAX_BODY_CHARS} bytes"
    ]


@pytest.fixture
async def socket_bot(redis_url: str, prefix: str) -> AsyncIterator[Harness]:
    agents.EXECUTIONS.clear()
    harness = Harness(redis_url=redis_url, prefix=prefix, env={"SLACK_APP_TOKEN": APP_TOKEN})
    harness.slack = SocketSlack()
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def test_a_socket_mode_envelope_nested_too_deep_is_acknowledged_and_logged_once(
    socket_bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    slack = socket_bot.slack
    assert isinstance(slack, SocketSlack)
    await slack.wait_for(lambda: slack.sockets, what="the web process to connect")
    envelope = (
        '{"envelope_id": "env-deep", "type": "events_api", "accepts_response_payload": false, '
        f'"payload": {deep_event()}}}'
    )
    await slack.sockets[-1].send_str(envelope)
    await slack.wait_for(
        lambda: [a for a in slack.acks if a.get("envelope_id") == "env-deep"],
        what="the deep envelope acknowledged, so that Slack does not send it again",
    )
    # A payload of the wrong shape over the socket is refused the same way, not passed to Bolt.
    ack = await slack.deliver("interactive", {"type": "block_actions", "actions": []})
    assert ack == {"envelope_id": ack["envelope_id"]}
    assert refusals(caplog, "Socket Mode: envelope") == [
        f"Socket Mode: envelope env-deep refused: nested {DEEP + 3} deep, more than "
        f"{MAX_BODY_DEPTH}",
        f"Socket Mode: envelope {ack['envelope_id']} refused: "
        "block_actions.actions: List should have at least 1 item after validation, not 0",
    ]
    assert not [r for r in caplog.records if r.exc_info], "no traceback"
    # The connection still serves.
    form = slash_command_form(
        text="delete u-100",
        user="UALICE",
        channel="CGENERAL",
        response_url=slack.response_url("UALICE"),
        trigger_id=new_trigger(),
    )
    ack = await slack.deliver("slash_commands", dict(parse_qsl(form)))
    assert ack["payload"]["text"].startswith("Starting *ops* on your task")


async def test_a_stored_record_nested_too_deep_is_read_as_unreadable_not_a_500(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    run_id = str(card.actions()[0]["value"]).split(":")[0]
    # A record this version cannot read (written by hand, or by something else entirely).
    await bot.redis.hset(bot.keys.run(run_id), ENVELOPE, "[" * DEEP + "]" * DEEP)
    status, _ = await bot.sender.click(card, "approve", user="UBOB")
    assert status == 200
    assert agents.EXECUTIONS == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no traceback"


@pytest.mark.parametrize(
    ("event", "wrong"),
    [
        ({"type": "subteam_updated", "subteam": "S0GROUP"}, "subteam: Input should be"),
        ({"type": "subteam_members_changed", "subteam_id": 7}, "subteam_id: Input should be"),
        (
            {"type": "member_joined_channel", "channel": {"id": "CGENERAL"}, "user": "UBOB"},
            "channel: Input should be",
        ),
        ({"type": "app_home_opened", "user": {"id": "UBOB"}}, "user: Input should be"),
        (
            {"type": "app_mention", "user": "UBOB", "channel": "CGENERAL", "ts": "1.5", "text": []},
            "text: Input should be",
        ),
        (
            {"type": "message", "user": "UBOB", "channel": "CGENERAL", "ts": 1.5, "text": "hi"},
            "ts: Input should be",
        ),
    ],
    ids=lambda value: value["type"] if isinstance(value, dict) else "",
)
async def test_a_signed_event_of_an_unexpected_shape_is_200_and_ignored_with_one_log_line(
    bot: Harness, caplog: pytest.LogCaptureFixture, event: dict[str, object], wrong: str
) -> None:
    status, _ = await bot.sender.event(event)
    assert status == 200, "Slack does not send it again"
    [line] = refusals(caplog, "event ignored")
    assert line.startswith(f"{event['type']} event ignored: {wrong}")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "no traceback"
    assert bot.slack.calls_to("chat.postMessage") == []
