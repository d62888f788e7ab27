"""The stand-in Slack refuses what real Slack would, judged by `slack_sdk`'s Block Kit models."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError, SlackObjectFormationError
from slack_sdk.web.async_client import AsyncWebClient

from bot.blocks.cards import (
    approval_decided_blocks,
    approval_request_blocks,
    arguments_modal,
    reject_modal,
)
from bot.blocks.status import status_blocks
from bot.console.slack_limits import plain_text_marks, refusal
from runtime.record.envelope import Decision
from tests.bot.blocks.test_cards import RUN, call, sent, sent_view
from tests.support.fake_slack import FakeSlack


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
        assert refusal("chat.update", {"blocks": sent(blocks)}) is None
    for view in (arguments_modal(quorum), reject_modal(quorum, "m" * 500, "UALICE")):
        assert refusal("views.open", {"view": sent_view(view)}) is None


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


async def test_what_the_builders_make_and_slack_would_refuse_fails_before_it_leaves(
    slack: FakeSlack,
) -> None:
    """The builders make `slack_sdk` models, which the client validates as it writes them: a
    card or a modal past Slack's limits fails in the process that sends it, nothing is sent."""
    client = AsyncWebClient(token="xoxb-test", base_url=slack.api_url)
    card = approval_request_blocks(RUN, call("{}", tool="t" * 3000))
    with pytest.raises(SlackObjectFormationError, match="cannot exceed 3000 characters"):
        await client.chat_postMessage(channel="C1", text="t", blocks=card)
    modal = reject_modal(call("{}"), "m" * 3001, "UALICE")
    with pytest.raises(SlackObjectFormationError, match="private_metadata cannot exceed 3000"):
        await client.views_open(trigger_id="1.2.3", view=modal)
    assert (slack.messages, slack.views, slack.refused) == ({}, [], []), "nothing reached Slack"


@pytest.mark.parametrize(
    ("text", "marked"),
    [
        ("`restart_service` in #demo for 1 hour", True),
        ("*Approve* it", True),
        ("approve _now_", True),
        ("~gone~", True),
        ("restart_service in #demo for 1 hour", False),
        ("2 * 3 approvals", False),
        ("Approve and allow…", False),
    ],
)
def test_markdown_marks_in_plain_text_are_found_anywhere_in_a_payload(
    text: str, marked: bool
) -> None:
    option = {"text": {"type": "plain_text", "text": text}, "value": "v"}
    menu = {"type": "static_select", "action_id": "m", "options": [option]}
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "*ok*"}, "accessory": menu}]
    found = plain_text_marks("chat.postMessage", {"blocks": json.dumps(blocks)})
    assert (found is not None) == marked
    if found is not None:
        assert found.detail.startswith("blocks[0].accessory.options[0].text:")
    view = {"type": "modal", "title": {"type": "plain_text", "text": text}, "blocks": []}
    assert (plain_text_marks("views.open", {"view": view}) is not None) == marked


def test_no_card_the_bot_builds_has_markdown_in_its_plain_text() -> None:
    """Every card shape, with its grant menu, edit button and quorum, and every modal."""
    offered = call('{"id": "u-1"}', grant_max_seconds=86_400, allow_edit=True)
    decisions = [
        Decision(outcome="approved", user_id="UBOB", reason=None, decided_at=1.0),
        Decision(outcome="rejected", user_id="UBOB", reason="*no*", decided_at=1.0),
    ]
    messages = [
        approval_request_blocks(RUN, offered, ["Bob"], "demo"),
        approval_request_blocks(RUN, call("{}", quorum=2, approvers=("UBOB", "UCAROL")), []),
        *(approval_decided_blocks(RUN, call("{}", decision=d)) for d in decisions),
        status_blocks(RUN.run_id, "*working*", "working"),
    ]
    for blocks in messages:
        assert plain_text_marks("chat.update", {"blocks": sent(blocks)}) is None
    for view in (arguments_modal(offered), reject_modal(offered, "m", "UALICE")):
        assert plain_text_marks("views.open", {"view": sent_view(view)}) is None


async def test_a_payload_refused_before_sending_is_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`slack_sdk`'s models refuse what Slack would (a text past its limit) before sending: a
    redraw sent after the acknowledgement says so in one line, as a refusal by Slack does."""
    from slack_sdk.errors import SlackObjectFormationError

    from bot.slack.client import send_later
    from runtime.process.tasks import TaskSet

    async def too_long() -> None:
        raise SlackObjectFormationError("text attribute cannot exceed 3000 characters")

    tasks = TaskSet("test")
    with caplog.at_level(logging.WARNING):
        send_later(tasks, too_long(), "card")
        await tasks.wait(grace=5)
    said = [r for r in caplog.records if r.name == "bot.slack.client"]
    assert [r.levelname for r in said] == ["WARNING"], caplog.text
    assert "past Slack's limits" in said[0].getMessage()
    assert all(r.exc_info is None for r in caplog.records), "no traceback"
