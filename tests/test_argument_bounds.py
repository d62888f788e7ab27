"""Arguments too deep or too long for the parser: a clear answer, never an HTTP 500.

Python's JSON parser recurses; a 1,400-deep array raises `RecursionError`, which is not the
`ValueError` that every parse here expects. The bounds are checked before anything parses.
"""

from __future__ import annotations

from typing import Any

import pytest

from runtime.calls.digest import (
    MAX_ARGUMENT_CHARS,
    MAX_ARGUMENT_DEPTH,
    ArgumentsTooLarge,
    call_digest,
)
from tests.fake_openai import Item, ModelRequest, message, tool_call
from tests.harness import Harness
from tests.model_scripts import delete_then_answer
from tests.test_edits import open_editor, submit


def nested(depth: int) -> str:
    return '{"user_id": ' + "[" * depth + "]" * depth + "}"


async def test_a_1400_deep_edit_is_answered_in_the_modal_and_records_nothing(bot: Harness) -> None:
    bot.model.script = delete_then_answer
    root = await bot.start_run("delete u-100")
    [card] = await bot.cards(root, 1)
    modal = await open_editor(bot, card, user="UBOB")

    answer = await submit(bot, modal, nested(1400), user="UBOB")
    assert answer["response_action"] == "errors"
    assert answer["errors"]["arguments"] == (
        f"The arguments nest 1401 levels deep; at most {MAX_ARGUMENT_DEPTH} are accepted."
    )
    run_id, approval_id = str(card.actions()[0]["value"]).split(":")[:2]
    fields: Any = await bot.redis.hkeys(bot.keys.run(run_id))
    assert not {f.decode() for f in fields} & {f"decision:{approval_id}", f"edit:{approval_id}"}
    assert card.action_ids() == ["approve", "approve_always", "reject"], "still open"


def test_call_digest_bounds_depth_and_size_with_a_clear_error() -> None:
    with pytest.raises(ArgumentsTooLarge, match="nest 1401 levels deep; at most 64 are accepted"):
        call_digest("delete_user", nested(1400))
    too_long = '{"user_id": "' + "x" * MAX_ARGUMENT_CHARS + '"}'
    with pytest.raises(ArgumentsTooLarge, match="characters long; at most 1,000,000 are accepted"):
        call_digest("delete_user", too_long)
    assert issubclass(ArgumentsTooLarge, ValueError), "handled wherever a parse error is"
    # Brackets inside strings do not count; the deepest the bound allows still has a digest.
    assert call_digest("t", '{"a": "[[[[[[' + "[" * 100 + '"}') == call_digest(
        "t", '{ "a" : "[[[[[[' + "[" * 100 + '" }'
    )
    assert len(call_digest("t", nested(MAX_ARGUMENT_DEPTH - 1))) == 64


async def test_a_model_call_too_deep_to_digest_is_refused_and_the_model_told_why(
    bot: Harness,
) -> None:
    # 200 deep: past the digest's bound, within what the SDK itself parses.
    def deep_then_answer(request: ModelRequest) -> list[Item]:
        if not request.tool_outputs:
            return [{**tool_call("delete_user", {}, "call_deep"), "arguments": nested(200)}]
        return [message("told: " + request.tool_outputs["call_deep"])]

    bot.model.script = deep_then_answer
    root = await bot.start_run("delete u-100")
    answer = await bot.final_answer(root)
    assert answer.text == (
        "told: The call to delete_user was not run: the approval policy does not allow it."
    )
    trail = await bot.audit_until("finished")
    [refused] = [e for e in trail if e["event"].startswith("auto_")]
    assert refused["event"] == "auto_rejected"
    assert not [e for e in trail if e["event"] == "executed"]
    assert not bot.slack.cards(), "nobody is asked to approve what no digest binds"
