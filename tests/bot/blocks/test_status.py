"""The status message says what the run waits for, and at the end whether anything ran."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.blocks.status import status_text
from runtime.reporter import Activity
from tests.support import agents
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness

POLICY = """
[[rule]]
tool = "delete_*"
auto = "approve"

[[rule]]
tool = "explode"
auto = "reject"
"""


@pytest.mark.parametrize(
    ("activity", "text"),
    [
        (
            Activity(steps=(), state="waiting", waiting_for=("delete_user",), approvals_asked=1),
            ":raised_hand: Waiting for approval (`delete_user`)",
        ),
        (
            Activity(
                steps=(),
                state="waiting",
                waiting_for=("delete_user", "restart_service"),
                approvals_asked=2,
            ),
            ":raised_hand: Waiting for 2 approvals (`delete_user`, `restart_service`)",
        ),
        (
            Activity(
                steps=(), state="waiting", waiting_for=("restart_service",), approvals_asked=2
            ),
            ":raised_hand: Waiting for 1 of 2 approvals (`restart_service`)",
        ),
        (
            Activity(steps=("tool:delete_user",), state="done", ran=("delete_user",)),
            ":white_check_mark: Done\n• called `delete_user`",
        ),
        (
            Activity(
                steps=("tool:list_users",),
                state="done",
                ran=("list_users",),
                not_run=("rejected:restart_service",),
            ),
            ":white_check_mark: Done\n• called `list_users`\n• `restart_service` was rejected",
        ),
        (
            Activity(steps=(), state="done", not_run=("rejected:restart_service",)),
            ":no_entry_sign: Nothing ran: `restart_service` was rejected",
        ),
        (
            Activity(steps=(), state="done", not_run=("expired:delete_user",)),
            ":no_entry_sign: Nothing ran: `delete_user` expired: nobody decided in time",
        ),
        (
            Activity(steps=(), state="done", not_run=("policy:explode", "rejected:delete_user")),
            ":no_entry_sign: Nothing ran: `explode` is not allowed by the policy; "
            "`delete_user` was rejected",
        ),
        (
            Activity(steps=(), state="done"),
            ":no_entry_sign: Nothing ran: the agent answered without calling a tool",
        ),
        (Activity(steps=(), state="failed"), ":x: Failed"),
        (
            Activity(
                steps=("tool:delete_user",) * 3 + ("handoff:billing", "tool:delete_user"),
                state="done",
                ran=("delete_user",),
            ),
            ":white_check_mark: Done\n• called `delete_user` \N{MULTIPLICATION SIGN}3\n"
            "• handed off to *billing*\n"
            "• called `delete_user`",
        ),
    ],
    ids=[
        "waiting-one",
        "waiting-two",
        "waiting-one-of-two",
        "done",
        "done-and-rejected",
        "rejected",
        "expired",
        "policy",
        "no-tools",
        "failed",
        "repeats-grouped",
    ],
)
def test_status_texts(activity: Activity, text: str) -> None:
    assert status_text(activity) == text


@pytest.fixture
def env_overrides(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "policy.toml"
    path.write_text(POLICY)
    return {"POLICY_FILE": str(path)}


def two_calls(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [
            tool_call("delete_user", {"user_id": "u-100"}, "c_delete"),
            tool_call("restart_service", {"service": "api"}, "c_restart"),
        ]
    return [message("over")]


async def test_waiting_for_one_of_two_then_done_saying_what_did_not_run(bot: Harness) -> None:
    bot.model.script = two_calls
    root = await bot.start_run("delete and restart")
    [card] = await bot.cards(root, 1)
    [status] = bot.slack.status_messages(root.ts)
    assert status.text == ":raised_hand: Waiting for 1 of 2 approvals (`restart_service`)"

    await bot.sender.reject(card, user="UBOB", reason="not now")
    await bot.final_answer(root)
    assert status.text.splitlines() == [
        ":white_check_mark: Done",
        "• called `delete_user`",
        "• `restart_service` was rejected",
    ]
    assert [tool for tool, _ in agents.EXECUTIONS] == ["delete_user"]


async def test_nothing_ran_when_the_only_call_is_rejected(bot: Harness) -> None:
    def restart(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("restart_service", {"service": "api"}, "c_restart")]
        return [message("not restarted")]

    bot.model.script = restart
    root = await bot.start_run("restart the api")
    [card] = await bot.cards(root, 1)
    await bot.sender.reject(card, user="UBOB", reason="not during the sale")
    await bot.final_answer(root)
    [status] = bot.slack.status_messages(root.ts)
    assert status.text == ":no_entry_sign: Nothing ran: `restart_service` was rejected"
    assert agents.EXECUTIONS == []


async def test_nothing_ran_when_the_policy_refuses(bot: Harness) -> None:
    def boom(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("explode", {}, "c_boom")]
        return [message("could not")]

    bot.model.script = boom
    root = await bot.start_run("explode")
    await bot.final_answer(root)
    [status] = bot.slack.status_messages(root.ts)
    assert status.text == ":no_entry_sign: Nothing ran: `explode` is not allowed by the policy"
    assert bot.slack.cards() == []


def two_asked(request: ModelRequest) -> list[dict[str, object]]:
    if not request.tool_outputs:
        return [
            tool_call("restart_service", {"service": "api"}, "c_restart"),
            tool_call("migrate", {"table": "orders"}, "c_migrate"),
        ]
    return [message("over")]


async def test_deciding_one_of_two_cards_redraws_the_status_at_once(bot: Harness) -> None:
    """The web redraws the status after a decision that leaves another call waiting: the
    worker does not touch the run until its last call is decided."""
    bot.model.script = two_asked
    root = await bot.start_run("restart and migrate")
    cards = await bot.cards(root, 2)
    [status] = bot.slack.status_messages(root.ts)
    assert status.text.startswith(":raised_hand: Waiting for 2 approvals")

    restart = next(c for c in cards if "restart_service" in c.all_text())
    await bot.sender.click(restart, "approve", user="UBOB")
    await bot.slack.wait_for(
        lambda: status.text == ":raised_hand: Waiting for 1 of 2 approvals (`migrate`)",
        what="the status after one of two decisions",
    )
    assert status.action_ids() == ["stop_run"], "still alive: Stop stays"
    assert agents.EXECUTIONS == [], "nothing runs before the round is decided"
