"""**Answer instead** and **Approve with a note…** in the console (issue 35): the card's buttons
open their modals for the clicker, as in Slack, and what the agent reads shows in its answer."""

from __future__ import annotations

from runtime.examples.ops import SERVICES
from tests.bot.console.test_console import Console, console

__all__ = ["console"]
"""The console fixture of `tests.bot.console.test_console`, used here too."""


async def submitted(console: Console, user: str, action_id: str, callback: str, text: str) -> None:
    """`user` clicks `action_id` on the one card, and submits its modal with `text`."""
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent(user, kind="click", message_ts=card.ts, action_id=action_id)
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], f"the {action_id} modal"
    )
    assert opened.user == user and opened.view["callback_id"] == callback
    values = {"reason": {"reason_input": text}}
    status, _ = await console.intent(user, kind="submit", view_id=opened.id, values=values)
    assert status == 200 and not opened.open


async def test_answer_instead_tells_the_agent_and_the_service_is_not_restarted(
    console: Console,
) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    assert "answer" in card.action_ids() and "approve_note" in card.action_ids()
    await submitted(console, "UCAROL", "answer", "answer_instead", "restarted by hand at 9:02")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "@carol answered instead of running `restart_service`: restarted by hand" in answer
    assert "💬 <@UCAROL> answered instead: restarted by hand at 9:02" in card.all_text()
    assert SERVICES["api"] == 0


async def test_a_note_with_an_approval_follows_the_tools_output(console: Console) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text="restart the api")
    [card] = await console.wait_for(console.cards, "a card")
    await submitted(console, "UBOB", "approve_note", "approve_note", "ask the on-call next time")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Note from @bob: ask the on-call next time" in answer
    assert SERVICES["api"] == 1
    assert "Note from <@UBOB>: ask the on-call next time" in card.all_text()
