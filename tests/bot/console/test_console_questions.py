"""The demo's MCP server asks mid-call: `/agent archive the orders table` in the console, its
question answered in the modal the **Answer** click opens, or cancelled by closing it."""

from __future__ import annotations

from bot.console.local_slack import Message
from tests.bot.console.test_console import Console
from tests.bot.console.test_console import console as console  # the fixture


async def archive_asked(console: Console) -> Message:
    await console.intent(
        "UALICE", kind="command", command="/agent", text="archive the orders table"
    )
    [question] = await console.wait_for(
        lambda: [m for m in console.slack.messages.values() if m.is_question() and m.thread_ts],
        "the question in the thread",
        timeout=30,
    )
    assert "Where should the archive of orders go" in question.all_text()
    shown: Message = question
    return shown


async def opened_form(console: Console, question: Message) -> str:
    await console.intent(
        "UALICE", kind="click", message_ts=question.ts, action_id="question_answer"
    )
    [opened] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the form"
    )
    assert opened.user == "UALICE" and opened.view["callback_id"] == "question_form"
    return str(opened.id)


async def test_the_demo_server_asks_and_the_modal_answers(console: Console) -> None:
    question = await archive_asked(console)
    view_id = await opened_form(console, question)
    await console.intent(
        "UALICE",
        kind="submit",
        view_id=view_id,
        values={"field_0": {"value": "backup bucket"}, "field_1": {"value": "90"}},
    )
    [answer] = await console.wait_for(console.answers, "the answer", timeout=20)
    assert "Archived orders (1250 rows) to backup bucket for 90 days" in answer


async def test_closing_the_form_cancels(console: Console) -> None:
    question = await archive_asked(console)
    view_id = await opened_form(console, question)
    await console.intent("UALICE", kind="close", view_id=view_id)
    [answer] = await console.wait_for(console.answers, "the answer", timeout=20)
    assert "Not archived: the person answered cancel" in answer
