"""The README's tour, step 10, in the console with the demo's own policy and example agents:
Approve always meeting a stricter rule, an argument the tool converts, a rule that cannot be
judged, an edit judged again."""

from __future__ import annotations

import json

from bot.console.local_slack import Message
from tests.bot.console.test_console import Console, block_index
from tests.bot.console.test_console import console as console  # the fixture


async def started(console: Console, text: str, count: int) -> list[Message]:
    await console.intent("UALICE", kind="command", command="/agent", text=text)
    cards: list[Message] = await console.wait_for(
        lambda: c if len(c := console.cards()) == count else None, f"{count} card(s)"
    )
    return cards


async def test_approve_always_meets_the_rule_that_keeps_billing_for_carol(
    console: Console,
) -> None:
    api, search, billing = await started(
        console, "restart api, restart search and restart billing", 3
    )
    assert "Rule: billing restarts" in billing.all_text()
    await console.intent("UBOB", kind="click", message_ts=api.ts, action_id="approve_always")
    await console.wait_for(lambda: "<@UBOB> approved" in search.all_text(), "search approved")
    assert "approve" in billing.action_ids(), "billing's rule: still carol's"
    await console.intent("UCAROL", kind="click", message_ts=billing.ts, action_id="approve")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert all(f"Restarted {s}" in answer for s in ("api", "search", "billing")), answer


async def test_an_amount_sent_as_a_string_is_shown_and_judged_as_a_number(
    console: Console,
) -> None:
    [card, *_] = await started(console, 'refund o-5521 "150000"', 1)
    text = card.all_text()
    assert "Rule: refunds over $1,000" in text and '\\"amount_cents\\": 150000' in text, text


async def test_a_rule_that_cannot_be_judged_leaves_only_whom_both_allow(console: Console) -> None:
    [card] = await started(console, "drop the orders table", 1)
    text = card.all_text()
    assert "Could not be judged: cascading drops (the call has no `cascade`)" in text, text
    await console.intent("UCAROL", kind="click", message_ts=card.ts, action_id="approve")
    assert "approve" in card.action_ids(), "carol is allowed by the defaults, not by the rule"
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(console.answers, "the answer")


async def test_an_edit_into_an_administrator_asks_for_the_typed_id(console: Console) -> None:
    [card] = await started(console, "delete u-100", 1)
    await console.intent(
        "UBOB",
        kind="click",
        message_ts=card.ts,
        block_index=block_index(card.blocks, "edit_arguments"),
        action_id="edit_arguments",
    )
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the edit modal"
    )
    edited = json.dumps({"user_id": "admin-1"})
    await console.intent(
        "UBOB", kind="submit", view_id=opened.id, values={"arguments": {"arguments_input": edited}}
    )
    await console.wait_for(
        lambda: card.action_ids() == ["approve_typed", "reject", "answer"],
        "the card asks for the id",
    )
    assert "Rule: administrators" in card.all_text() and console.answers() == []
