"""The stand-in Slack refuses what real Slack would, judged by `slack_sdk`'s Block Kit models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import (
    approval_decided_blocks,
    approval_request_blocks,
    arguments_modal,
    reject_modal,
)
from bot.blocks.status import status_blocks
from bot.console.slack_limits import refusal
from runtime.record.envelope import Decision
from tests.fake_slack import FakeSlack
from tests.test_cards import RUN, call


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


BUTTON = {"type": "button", "action_id": "a", "text": {"type": "plain_text", "text": "Go"}}


@pytest.mark.parametrize(
    ("method", "args", "error"),
    [
        ("chat.postMessage", {"blocks": [section("x" * 3001)]}, "invalid_blocks"),
        ("chat.update", {"blocks": json.dumps([section("x" * 3001)])}, "invalid_blocks"),
        ("chat.postMessage", {"blocks": [section("x")] * 51}, "invalid_blocks"),
        ("chat.postMessage", {"blocks": [{**section("x"), "colour": "red"}]}, "invalid_blocks"),
        ("chat.postMessage", {"blocks": [{"type": "section", "text": "x"}]}, "invalid_blocks"),
        ("chat.postMessage", {"blocks": [{"type": "banner"}]}, "invalid_blocks"),
        (
            "chat.postMessage",
            {"blocks": [{"type": "actions", "elements": [{**BUTTON, "style": "blue"}]}]},
            "invalid_blocks",
        ),
        (
            "chat.postMessage",
            {"blocks": [{"type": "actions", "elements": [{**BUTTON, "value": "v" * 2001}]}]},
            "invalid_blocks",
        ),
        (
            "chat.postMessage",
            {"blocks": [{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}]},
            "invalid_blocks",
        ),
        ("chat.postEphemeral", {"text": "x" * 40_001}, "msg_too_long"),
        (
            "views.open",
            {"view": {"type": "modal", "title": {"type": "plain_text", "text": "t" * 25}}},
            "invalid_blocks",
        ),
        ("response", {"blocks": [section("x" * 3001)]}, "invalid_blocks"),
    ],
    ids=[
        "section-over-3000",
        "form-encoded-update",
        "51-blocks",
        "unknown-field",
        "text-not-an-object",
        "unknown-block",
        "bad-button-style",
        "button-value-over-2000",
        "field-over-2000",
        "text-over-40000",
        "modal-title-over-24",
        "response-url",
    ],
)
def test_what_slack_would_refuse_is_refused(method: str, args: dict[str, Any], error: str) -> None:
    found = refusal(method, args)
    assert found is not None
    assert found.error == error


def test_every_card_status_and_modal_the_bot_builds_passes() -> None:
    huge = json.dumps({"rows": [f"row-{n}-<&>" for n in range(3000)]})
    quorum = call(huge, approvers=("UBOB", "S0SRE"), quorum=2)
    decisions = [
        Decision(outcome="approved", user_id="UBOB", reason=None, decided_at=1.0),
        Decision(outcome="rejected", user_id="UBOB", reason="r" * 2000, decided_at=1.0),
        Decision(outcome="expired", reason=None, decided_at=1.0),
        Decision(outcome="stopped", user_id="UBOB", reason=None, decided_at=1.0),
    ]
    messages = [
        approval_request_blocks(RUN, quorum, ["@sre", "Bob"]),
        *(approval_decided_blocks(RUN, call(huge, decision=d)) for d in decisions),
        status_blocks(RUN.run_id, "x" * 3000, "working"),
    ]
    for blocks in messages:
        assert refusal("chat.update", {"blocks": blocks}) is None
    for view in (arguments_modal(quorum), reject_modal(quorum, "m" * 500)):
        assert refusal("views.open", {"view": view}) is None


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    fake = FakeSlack()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


async def test_an_over_long_block_is_answered_invalid_blocks_and_fails_the_test(
    slack: FakeSlack,
) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    with pytest.raises(SlackApiError) as raised:
        await client.chat_postMessage(channel="C1", text="t", blocks=[section("x" * 3001)])
    assert raised.value.response["error"] == "invalid_blocks"
    assert slack.messages == {}, "nothing was posted"
    [refused] = slack.refused
    assert refused.method == "chat.postMessage"
    assert "cannot exceed 3000 characters" in refused.detail
    with pytest.raises(AssertionError, match="Slack would have refused"):
        slack.assert_nothing_refused()
    slack.refused.clear()

    await client.chat_postMessage(channel="C1", text="t", blocks=[section("x" * 3000)])
    assert len(slack.messages) == 1
