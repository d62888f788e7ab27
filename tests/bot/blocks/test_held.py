"""The card of a held output: the output shortened with all of it on demand, Release / Edit and
release / Withhold bound to the output's digest, and the decided card."""

from __future__ import annotations

import json

from bot.blocks.cards import (
    answer_modal,
    approval_decided_blocks,
    approval_request_blocks,
    arguments_modal,
    reject_modal,
)
from runtime.record.envelope import Decision
from tests.bot.blocks.test_cards import RUN, call, sent, sent_view

OUTPUT_DIGEST = "f" * 64


def test_a_held_output_is_shown_shortened_with_all_of_it_on_demand() -> None:
    long = "\n".join(f"row {n}: someone@example.com" for n in range(600))
    pending = call('{"user_id": "u-100"}', held=long, digest=OUTPUT_DIGEST, answer=False)
    blocks = sent(approval_request_blocks(RUN, pending, ["UBOB"]))
    text = json.dumps(blocks)
    assert "Its output is held" in text and "row 0:" in text and "row 599" not in text
    [actions] = [b for b in blocks if b["type"] == "actions"]
    labels = [e["text"]["text"] for e in actions["elements"]]
    assert labels == ["Release", "Withhold", "View full output"], "too long to edit"
    assert all(e["value"].endswith(OUTPUT_DIGEST) for e in actions["elements"])
    modal = json.dumps(sent_view(arguments_modal(pending)))
    assert "row 0:" in modal and "row 599" in modal


def test_edit_and_release_starts_from_the_output_and_withhold_asks_why() -> None:
    pending = call('{"user_id": "u-100"}', held="deleted u-100", digest=OUTPUT_DIGEST)
    labels = [
        e["text"]["text"]
        for b in sent(approval_request_blocks(RUN, pending, ["UBOB"]))
        if b["type"] == "actions"
        for e in b["elements"]
    ]
    assert labels == ["Release", "Edit and release", "Withhold"]
    edit = sent_view(answer_modal(pending, "{}", "UALICE"))
    assert edit["callback_id"] == "answer_instead" and "deleted u-100" in json.dumps(edit)
    withhold = sent_view(reject_modal(pending, "{}", "UALICE"))
    assert withhold["title"]["text"] == "Withhold output"


def test_a_withheld_output_is_not_redrawn_on_its_decided_card() -> None:
    decision = Decision(outcome="rejected", user_id="UBOB", reason="secrets", decided_at=1.0)
    pending = call('{"user_id": "u-100"}', held="card 4242", digest=OUTPUT_DIGEST)
    text = json.dumps(
        sent(approval_decided_blocks(RUN, pending.model_copy(update={"decision": decision})))
    )
    assert "withheld the output of `delete_user`: secrets" in text and "4242" not in text
