"""Arguments too deep or too long for the parser: a clear answer, never an HTTP 500.

Python's JSON parser recurses; a 1,400-deep array raises `RecursionError`, which is not the
`ValueError` that every parse here expects. The bounds are checked before anything parses: an
edit's in its modal, a model's call before the SDK sees it (the thread says why, the run ends).
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
from tests.conftest import with_env
from tests.runtime.decisions.test_edits import open_editor, submit
from tests.support import agents
from tests.support.fake_openai import tool_call
from tests.support.harness import Harness
from tests.support.model_scripts import delete_then_answer


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
    assert card.action_ids() == ["approve", "approve_note", "approve_always", "reject", "answer"], (
        "still open"
    )


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


@pytest.mark.parametrize(
    ("arguments", "bound"),
    [
        # Past the digest's bound, within what the SDK itself parses.
        (nested(200), "the arguments nest 201 levels deep; at most 64 are accepted"),
        # Past what the SDK's own parse survives: a RecursionError before any approval, and
        # the job was retried until it was dead-lettered.
        (nested(1500), "the arguments nest 1501 levels deep; at most 64 are accepted"),
        (
            '{"user_id": "' + "x" * MAX_ARGUMENT_CHARS + '"}',
            "the arguments are 1,000,015 characters long; at most 1,000,000 are accepted",
        ),
    ],
    ids=["200-deep", "1500-deep", "too-long"],
)
async def test_a_model_call_too_deep_or_long_is_refused_in_the_thread_and_the_run_ends(
    bot: Harness, arguments: str, bound: str
) -> None:
    bot.model.script = lambda request: [
        {**tool_call("delete_user", {}, "call_deep"), "arguments": arguments}
    ]
    root = await bot.start_run("delete u-100")
    answer = await bot.final_answer(root)
    assert answer.text == (
        f":x: The model asked for a call too large to show or check (`delete_user`: {bound}), "
        "so nothing was run and the run stopped. Run "
        f"`{answer.text.split('`')[-2]}`: an admin can find it in the logs."
    )
    trail = await bot.audit_until("failed")
    [failed] = [e for e in trail if e["event"] == "failed"]
    assert failed["failure"] == "arguments_refused"
    assert not [e for e in trail if e["event"] in ("requested", "executed")]
    assert not bot.slack.cards(), "nobody is asked to approve what no digest binds"
    assert len(bot.model.requests) == 1, "refused once, not retried"
    assert await bot.entries(bot.keys.dead_jobs) == []
    assert agents.EXECUTIONS == []


@with_env(AGENTS="tests.support.turn_agents:REGISTRY")
async def test_a_tool_that_recurses_too_deep_ends_the_run_once_not_retried(bot: Harness) -> None:
    bot.model.script = lambda request: [tool_call("parse_report", {"report": "q3"}, "call_q3")]
    root = await bot.start_run("parse the q3 report")
    answer = await bot.final_answer(root)
    assert answer.text.startswith(
        ":x: The agent stopped with an error (something was nested too deeply to handle)."
    ), answer.text
    assert [tool for tool, _ in agents.EXECUTIONS] == ["parse_report"], "not retried"
    assert await bot.entries(bot.keys.dead_jobs) == []
