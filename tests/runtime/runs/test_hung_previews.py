"""Previews that hang, on a real worker, and a rule that turns previews off.

A synchronous preview that never returns keeps its thread: seven of them must not hold back
the next card's preview, nor the synchronous tools the SDK runs on asyncio's default executor.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.runtime.decisions.test_edits import open_editor, submit
from tests.support import preview_agents
from tests.support.deployment import Deployment
from tests.support.fake_openai import Item, ModelRequest, message, tool_call
from tests.support.harness import Harness

PREVIEW_AGENTS = {"AGENTS": "tests.support.preview_agents:REGISTRY"}


def archive_each(request: ModelRequest) -> list[Item]:
    """`archive a b c`: archive each project, all calls at once; then say what each got."""
    if request.tool_outputs:
        return [message("done: " + ", ".join(request.tool_outputs.values()))]
    projects = request.task.split()[1:]
    return [tool_call("archive_project", {"project": p}, f"call_{p}") for p in projects]


async def test_seven_hung_previews_hold_back_no_later_card_nor_other_runs(
    deployment: Deployment,
) -> None:
    deployment.model.script = archive_each
    await deployment.web(**PREVIEW_AGENTS)
    deployment.worker("worker.1", **PREVIEW_AGENTS)
    hung = await deployment.start_run("archive " + " ".join(f"hung-{n}" for n in range(1, 8)))
    cards = await deployment.cards(hung, 7)
    assert all("*Preview*\\n_no preview_" in card.all_text() for card in cards)

    root = await deployment.start_run("archive hung-8")
    asked = time.monotonic()
    [card] = await deployment.cards(root, 1)
    waited = time.monotonic() - asked
    assert waited < 2.5, f"{waited:.1f} s: held back for the preview's 3 s, behind hung ones"
    assert "*Preview*\\n_no preview_" in card.all_text()

    root = await deployment.start_run("archive notes")
    [card] = await deployment.cards(root, 1)
    await deployment.sender.click(card, "approve", user="UBOB")
    [answer] = await deployment.final_answers(root)
    assert answer.text == "done: archived notes", "a synchronous tool still runs"
    assert "Traceback" not in deployment.logs_text()


NO_PREVIEW = """
[[rule]]
tool = "archive_project"
preview = false
"""


@pytest.mark.parametrize("edited", [False, True], ids=["approved", "edited"])
async def test_a_rule_with_preview_false_shows_no_preview_and_never_calls_it(
    bot: Harness, tmp_path: Path, edited: bool
) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(NO_PREVIEW)
    await bot.stop_workers()
    await bot.start_worker(POLICY_FILE=str(path), **PREVIEW_AGENTS)
    preview_agents.PREVIEWED.clear()
    bot.model.script = archive_each
    root = await bot.start_run("archive roadmap")
    [card] = await bot.cards(root, 1)
    assert "*Preview*" not in card.all_text()
    if edited:  # nor on the edited arguments, before they run
        modal = await open_editor(bot, card, user="UBOB")
        await submit(bot, modal, '{"project": "roadmap-2"}', user="UBOB")
    else:
        await bot.sender.click(card, "approve", user="UBOB")
    answer = await bot.final_answer(root)
    assert answer.text.endswith("archived roadmap-2" if edited else "done: archived roadmap")
    assert preview_agents.PREVIEWED == [], "the preview was never called"
    assert bot.slack.notes(root.ts) == []


async def test_without_such_a_rule_the_synchronous_preview_is_shown(bot: Harness) -> None:
    await bot.stop_workers()
    await bot.start_worker(**PREVIEW_AGENTS)
    preview_agents.PREVIEWED.clear()
    bot.model.script = archive_each
    root = await bot.start_run("archive roadmap")
    [card] = await bot.cards(root, 1)
    assert "*Preview*\\nWould archive roadmap and its 12 documents." in card.all_text()
    assert preview_agents.PREVIEWED == ["roadmap"]
