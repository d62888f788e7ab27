"""The app's Messages tab in the console, as Slack shows it: opening it sets the suggested
prompts from the registry's agents, writing a task there starts a run, and its card waits in
#demo (the demo's `APPROVAL_CHANNEL`), where the approvers are, with a link each way."""

from __future__ import annotations

from bot.words import messages_tab as words
from tests.bot.console.test_console import Console, console

__all__ = ["console"]
"""The console fixture of `tests.bot.console.test_console`, used here too."""


async def test_opening_the_tab_shows_the_agents_as_prompts(console: Console) -> None:
    status, _ = await console.intent("UALICE", kind="messages")
    assert status == 200
    shown = await console.wait_for(
        lambda: console.slack.agents.prompts.get("DUALICE"), "the suggested prompts"
    )
    assert shown["title"] == words.PROMPTS_TITLE
    named = [p["title"].split(":")[0] for p in shown["prompts"]]
    assert named == console.registry.names[: words.PROMPTS_MOST], "the registry's agents"
    lines = console.registry.lines
    assert shown["prompts"] == [words.prompt(name, lines[name]) for name in named]
    assert all(lines[name] for name in named), "each with its one line"
    assert "UALICE" not in console.slack.home_tabs, "the Messages tab, not the Home tab"


async def test_a_task_written_in_the_tab_asks_in_demo_and_an_approval_answers_there(
    console: Console,
) -> None:
    status, _ = await console.intent("UALICE", kind="write", text="delete u-100")
    assert status == 200
    [card] = await console.wait_for(console.cards, "a card in #demo")
    assert card.thread_ts is None
    [asked] = [m for m in console.slack.messages.values() if m.user == "UALICE"]
    assert asked.channel == "DUALICE"
    assert f"archives/DUALICE/p{asked.ts.replace('.', '')}" in card.all_text()
    assert not console.cards("DUALICE"), "no card in alice's own conversation"

    def in_thread() -> list[str]:
        return [
            m.text
            for m in console.slack.messages.values()
            if m.channel == "DUALICE" and m.thread_ts == asked.ts
        ]

    await console.wait_for(
        lambda: any(f"archives/CDEMO/p{card.ts.replace('.', '')}" in t for t in in_thread()),
        "the waiting note, linking to the card",
    )
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(
        lambda: any("Deleted user u-100" in t for t in in_thread()), "the answer in the thread"
    )


async def test_a_prompt_sent_as_it_is_asks_what_the_agent_should_do(console: Console) -> None:
    await console.intent("UALICE", kind="write", text="ops:")
    told = await console.wait_for(
        lambda: [
            m.text
            for m in console.slack.messages.values()
            if m.channel == "DUALICE" and m.user is None
        ],
        "the question",
    )
    assert told == [words.empty_task("ops")]
    assert console.cards() == []
