"""Hosted MCP tools (OpenAI runs them): the SDK surfaces their approval requests as
interruptions, so they get the same cards, and the decision goes back to OpenAI."""

from __future__ import annotations

from typing import Any

from tests.bot.blocks.test_cards import texts
from tests.conftest import with_env
from tests.support.fake_openai import ModelRequest, message
from tests.support.harness import Harness

HOSTED = with_env(AGENTS="tests.support.mcp_agents:HOSTED")


def approval_responses(request: ModelRequest) -> list[dict[str, Any]]:
    return [item for item in request.input if item.get("type") == "mcp_approval_response"]


def ask_then_answer(request: ModelRequest) -> list[dict[str, Any]]:
    """OpenAI asks to call `delete_page` on the hosted server `wiki`; then reports the answer."""
    responses = approval_responses(request)
    if not responses:
        request_item = {
            "type": "mcp_approval_request",
            "id": "mcpr_1",
            "server_label": "wiki",
            "name": "delete_page",
            "arguments": '{"page": "Home"}',
        }
        return [request_item]
    [response] = responses
    return [message(f"approve={response['approve']} reason={response.get('reason')}")]


@HOSTED
async def test_a_hosted_mcp_approval_request_gets_a_card_and_the_decision_goes_back(
    bot: Harness,
) -> None:
    bot.model.script = ask_then_answer
    root = await bot.start_run("delete the Home page")
    [card] = await bot.cards(root, 1)
    shown = "\n".join(texts(card.blocks))
    assert "*researcher* wants to run `delete_page` on MCP server `wiki`" in shown
    assert '"page": "Home"' in shown

    await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert answer.text.startswith("approve=True"), answer.text


@HOSTED
async def test_a_rejected_hosted_mcp_call_is_refused_to_openai(bot: Harness) -> None:
    bot.model.script = ask_then_answer
    root = await bot.start_run("delete the Home page")
    [card] = await bot.cards(root, 1)
    await bot.sender.reject(card, user="UBOB", reason="the wiki is read-only today")
    answer = await bot.final_answer(root)
    assert answer.text.startswith("approve=False"), answer.text
    assert "Reason: the wiki is read-only today" in answer.text, "the reason goes to OpenAI"
