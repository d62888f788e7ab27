"""No OpenAI key: the bundled example agents run on a scripted model, with real approvals."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.settings import load_settings
from runtime.examples.ops import SERVICES, USERS
from runtime.models.scripted import intents_of, model_run_config, uses_scripted_model
from tests.support.harness import Harness

EXAMPLE_AGENTS = {"AGENTS": "runtime.examples:AGENTS"}


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("delete u-100", [("delete_user", {"user_id": "u-100"})]),
        ("Restart the API please", [("restart_service", {"service": "api"})]),
        ("restart foo", [("restart_service", {"service": "foo"})]),
        ("refund o-1 1200", [("refund_order", {"order_id": "o-1", "amount_cents": 1200})]),
        (
            "delete u-101 and restart search",
            [("delete_user", {"user_id": "u-101"}), ("restart_service", {"service": "search"})],
        ),
        ("list users", [("list_users", {})]),
        ("drop the orders table", [("drop_table", {"table": "orders"})]),
        (
            "list tables and drop table users",
            [("list_tables", {}), ("drop_table", {"table": "users"})],
        ),
        (
            "greet me in Spanish",
            [("respond_spanish", {"input": "greet me in Spanish"}), ("get_user_name", {})],
        ),
        ("refund o-1", []),
        ("what is the weather?", []),
    ],
)
def test_intents_are_read_from_the_task(task: str, expected: list[tuple[str, object]]) -> None:
    assert [(i.tool, i.arguments) for i in intents_of(task)] == expected


@pytest.mark.parametrize(
    ("environ", "scripted"),
    [
        ({}, True),
        ({"OPENAI_API_KEY": "sk-real"}, False),
        ({"AGENTS": "tests.support.agents:REGISTRY"}, False),
    ],
    ids=["no-key", "key", "own-agents"],
)
def test_the_script_serves_only_the_example_agents_without_a_key(
    environ: dict[str, str], scripted: bool
) -> None:
    settings = load_settings({"SLACK_BOT_TOKEN": "xoxb-x", "SLACK_SIGNING_SECRET": "y", **environ})
    assert uses_scripted_model(settings) is scripted
    assert (model_run_config(settings) is not None) is scripted


@pytest.fixture
async def demo_bot(redis_url: str, prefix: str, pretend_world: None) -> AsyncIterator[Harness]:
    harness = Harness(redis_url=redis_url, prefix=prefix, env=EXAMPLE_AGENTS, scripted_model=True)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


@pytest.fixture
async def impatient_demo_bot(
    redis_url: str, prefix: str, pretend_world: None
) -> AsyncIterator[Harness]:
    env = {**EXAMPLE_AGENTS, "APPROVAL_TTL_SECONDS": "1"}
    harness = Harness(redis_url=redis_url, prefix=prefix, env=env, scripted_model=True)
    await harness.start()
    try:
        yield harness
    finally:
        await harness.stop()


async def test_approve_runs_the_real_example_tool(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("delete u-100")
    [card] = await demo_bot.cards(root, 1)
    assert "*ops* wants to run `delete_user`" in card.all_text()
    assert "u-100" in card.all_text()
    assert "u-100" in USERS, "nothing ran before the click"

    await demo_bot.sender.click(card, "approve", user="UBOB")
    answer = await demo_bot.final_answer(root)
    assert answer.text.startswith("Scripted model (no OPENAI_API_KEY set)")
    assert "`delete_user`: Deleted user u-100 (Ada Lovelace)." in answer.text
    assert "u-100" not in USERS


async def test_a_rejection_reason_reaches_the_answer(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("delete u-101 and restart the api")
    first, second = await demo_bot.cards(root, 2)
    await demo_bot.sender.click(first, "approve", user="UBOB")
    await demo_bot.sender.reject(second, user="UCAROL", reason="not during the sale")

    answer = await demo_bot.final_answer(root)
    assert "Deleted user u-101 (Grace Hopper)." in answer.text
    assert "`restart_service` was rejected by ucarol. Reason: not during the sale" in (answer.text)
    assert "UCAROL" not in answer.text, "people read names, not ids"
    assert SERVICES["api"] == 0


async def test_a_refund_hands_off_to_billing_which_asks_for_approval(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("refund o-5521 1200")
    [card] = await demo_bot.cards(root, 1)
    assert "*billing* wants to run `refund_order`" in card.all_text()
    await demo_bot.sender.click(card, "approve", user="UBOB")
    answer = await demo_bot.final_answer(root)
    assert "Refunded 12.00 on order o-5521 (refund rf-0001)." in answer.text


async def test_listed_users_read_as_pretty_json_not_a_python_repr(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("list users")
    answer = await demo_bot.final_answer(root)
    assert '`list_users`: \n```\n[\n  {\n    "id": "u-100",' in answer.text
    assert "{'id'" not in answer.text


async def test_a_task_it_cannot_read_gets_examples_and_no_card(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("what is the weather?")
    answer = await demo_bot.final_answer(root)
    assert "did not understand “what is the weather?”" in answer.text
    assert "`delete u-100`" in answer.text
    assert "set OPENAI_API_KEY" in answer.text
    assert demo_bot.slack.cards() == []


async def test_an_expired_call_is_told_in_the_scripts_words_not_the_models(
    impatient_demo_bot: Harness,
) -> None:
    bot = impatient_demo_bot
    root = await bot.start_run("delete u-100")
    await bot.cards(root, 1)
    answer = await bot.final_answer(root, timeout=15)
    assert "• `delete_user` was not run: no one approved or rejected it in time" in answer.text
    assert "Tell the user" not in answer.text, "words meant for the model stay with the model"
    [status] = bot.slack.status_messages(root.ts)
    assert (
        status.text == ":no_entry_sign: Nothing ran: `delete_user` expired: nobody decided in time"
    )
    assert "u-100" in USERS


async def test_a_task_it_cannot_read_is_quoted_shortened(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("what is " + "the weather " * 100)
    answer = await demo_bot.final_answer(root)
    assert "did not understand “what is the weather the weather" in answer.text
    assert "…”" in answer.text
    assert len(answer.text) < 800


async def test_dropping_a_table_asks_for_the_mcp_servers_tool(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("drop the orders table")
    [card] = await demo_bot.cards(root, 1)
    assert "*ops* wants to run `drop_table` on MCP server `db`" in card.all_text()
    assert "Drop a table and every row in it." in card.all_text()
    await demo_bot.sender.click(card, "approve", user="UBOB")
    answer = await demo_bot.final_answer(root)
    assert "`drop_table`: Dropped table orders (1250 rows)." in answer.text


async def test_a_nested_agent_tool_asks_at_both_levels_and_answers(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("greet me in spanish")
    [outer] = await demo_bot.cards(root, 1)
    assert "*ops* wants to run `respond_spanish`" in outer.all_text()
    await demo_bot.sender.click(outer, "approve", user="UBOB")

    [_, inner] = await demo_bot.cards(root, 2)
    assert "`get_user_name` asked by *spanish*, inside *ops*" in inner.all_text()
    await demo_bot.sender.click(inner, "approve", user="UBOB")
    answer = await demo_bot.final_answer(root)
    assert "• `respond_spanish`: ¡Hola, Alice!" in answer.text
    trail = await demo_bot.audit_until("finished")
    ran = [entry["tool"] for entry in trail if entry["event"] == "executed"]
    assert ran == ["get_user_name", "respond_spanish"]


async def test_the_shell_agent_runs_the_approved_command(demo_bot: Harness) -> None:
    root = await demo_bot.start_run("shell: echo hello > notes.txt && cat notes.txt")
    [card] = await demo_bot.cards(root, 1)
    assert "*shell* wants to run `shell`" in card.all_text()
    assert "echo hello &gt; notes.txt &amp;&amp; cat notes.txt" in card.all_text()
    await demo_bot.sender.click(card, "approve", user="UBOB")
    answer = await demo_bot.final_answer(root)
    assert "• `shell`: hello" in answer.text, answer.text
    [status] = demo_bot.slack.status_messages(root.ts)
    assert "Nothing ran" not in status.text, status.text
