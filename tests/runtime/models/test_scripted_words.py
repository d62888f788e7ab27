"""The scripted model's answers say once that their words are canned, and say a tool ran only
when one did."""

from __future__ import annotations

from runtime.models.scripted import _answer, _Called
from runtime.record import Decision
from runtime.runs.state_decisions import rejection_message


def rejected(tool: str) -> _Called:
    decision = Decision(
        outcome="rejected", user_id="UBOB", user_name="bob", reason="no", decided_at=1.0
    )
    return _Called(tool, {}, rejection_message(decision, tool))


def test_an_answer_where_nothing_ran_does_not_say_the_tools_ran() -> None:
    """A rejected run still said "the tools ran for real"."""
    answer = _answer([rejected("restart_service")], "restart the api")
    assert answer.splitlines()[0] == (
        "Scripted model (no OPENAI_API_KEY set): these words are canned; no tool ran."
    )
    assert "ran for real" not in answer
    assert "`restart_service` was rejected by bob" in answer
    not_understood = _answer([], "what is the weather?")
    assert "no tool ran" in not_understood and "ran for real" not in not_understood


def test_an_answer_where_a_tool_ran_says_so_once() -> None:
    ran = _Called("delete_user", {"user_id": "u-100"}, "Deleted user u-100 (Ada Lovelace).")
    answer = _answer([ran, rejected("restart_service")], "delete u-100 and restart the api")
    assert answer.splitlines()[0].endswith("these words are canned, the tools ran for real.")


def test_a_greeting_from_the_agent_used_as_a_tool_is_not_marked_canned_twice() -> None:
    """Its answer is ops's tool output, under ops's own "canned" heading."""
    greeting = _answer([_Called("get_user_name", {}, "Alice")], "greet me in spanish")
    assert greeting == "¡Hola, Alice!"
    answer = _answer([_Called("respond_spanish", {"input": "x"}, greeting)], "greet me in spanish")
    assert answer.count("canned") == 1
