"""The promise, checked over generated histories against a reference model (tests/promise/).

`test_the_promise_holds_over_generated_histories` is the bounded profile CI runs (marked
`chaos`: about two minutes): Hypothesis generates sequences of runs, clicks, time and faults on
the real web app and worker (see `tests.promise.machine`), and every invariant is checked after
every step. `python3 scripts/dev.py soak --steps N --seed S` runs the same machine for as long
as asked.

The tests after it are the minimal sequences the machine found for the violations it found
before they were fixed (Approve always meeting a stricter rule, a grant over a coerced argument,
a rule that cannot be judged, an edit, a retried turn, an outsider's run, a worker killed in a
tool beside a call that waits): each is a regular test now, and fails on any violation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.promise import machine as promise
from tests.promise import world
from tests.promise.machine import PromiseMachine
from tests.promise.world import PlannedCall

SEQUENCES = int(os.environ.get("PROMISE_SEQUENCES", "15"))
STEPS = int(os.environ.get("PROMISE_STEPS", "20"))


@pytest.fixture(scope="module", autouse=True)
def rig_session() -> Iterator[None]:
    yield
    promise.close_session()


@pytest.mark.chaos  # about two minutes: CI runs it, `-m "not chaos"` skips it locally
@pytest.mark.timeout(900)
def test_the_promise_holds_over_generated_histories() -> None:
    run_state_machine_as_test(
        PromiseMachine,
        settings=settings(
            max_examples=SEQUENCES,
            stateful_step_count=STEPS,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    print(f"\n{promise.STATS.summary()}")
    assert promise.STATS.steps >= SEQUENCES, "every sequence ran steps"


def call(tool: str, **arguments: Any) -> PlannedCall:
    return PlannedCall(tool, arguments)


@pytest.fixture
def history() -> Iterator[PromiseMachine]:
    """One history, stepped by hand as Hypothesis printed it."""
    machine = PromiseMachine()
    try:
        yield machine
    finally:
        machine.teardown()


ITEM_1 = "issue 31 item 1"


def test_approve_always_covers_no_call_of_another_rule(history: PromiseMachine) -> None:
    later = [
        [call("drop_table", name="tmp_a", force=False)],
        [call("drop_table", name="prod_users", force=False)],
    ]
    history.begin("strict", "UALICE", later)
    history.click(0, "UBOB", "always")


def test_each_call_approve_always_approves_is_audited(history: PromiseMachine) -> None:
    later = [
        [call("drop_table", name="tmp_a", force=False)],
        [call("drop_table", name="tmp_b", force=False)],
    ]
    history.begin("strict", "UALICE", later)
    history.click(0, "UBOB", "always")


ITEMS_2_3 = "issue 31 items 2 and 3"


def test_a_grant_is_judged_on_the_values_the_tool_receives(history: PromiseMachine) -> None:
    history.begin("strict", "UALICE", [[call("drop_table", name="tmp_a", force=False)]])
    history.click(0, "UBOB", "grant:tool:3600")
    history.start_run("UALICE", [[call("drop_table", name="tmp_a", force="true")]])


def test_a_rule_that_cannot_be_judged_loosens_nothing(history: PromiseMachine) -> None:
    history.begin(
        "strict", "UALICE", [[call("refund_order", order_id="o-3", amount_cents="150000")]]
    )
    history.click(0, "UBOB", "approve")


ITEM_4 = "issue 31 item 4"


def test_an_edit_is_judged_like_a_new_call(history: PromiseMachine) -> None:
    history.begin("typed", "UALICE", [[call("drop_table", name="tmp_a", force=False)]])
    history.click(0, "UBOB", "edit")


ITEM_5 = "issue 31 item 5"


def test_a_retried_job_never_reissues_a_call(history: PromiseMachine) -> None:
    history.begin(
        "strict",
        "UALICE",
        [
            [call("drop_table", name="tmp_a", force=False)],
            [call("list_users")],
            [call("list_users")],
        ],
    )
    history.world_event("model 5xx", seconds=60, times=1, after=1)
    history.click(0, "UBOB", "approve")


ITEM_7 = "issue 31 item 7"


def test_a_grant_never_decides_for_an_outsiders_run(history: PromiseMachine) -> None:
    history.begin("strict", "UALICE", [[call("drop_table", name="tmp_a", force=False)]])
    history.click(0, "UBOB", "grant:tool:3600")
    history.start_run("UGUEST", [[call("drop_table", name="tmp_b", force=False)]])


def test_a_call_beside_one_that_waits_runs_once_when_its_worker_is_killed_in_it(
    history: PromiseMachine,
) -> None:
    """The soak's finding: the replacement worker asked the model again and `list_users` ran
    twice. The rig's fault, not the runtime's: the kill, started from inside the tool, handed
    the tool's context (its call id, which keys an agent tool's inner model turns) to the
    replacement, whose turn then missed the journaled one. A new process inherits nothing."""
    history.begin("typed", "UALICE", [[call("delete_user", user_id="u-100")]])
    history.world_event("worker killed in a tool", seconds=60, times=1, after=0)
    history.start_run(
        "UBOB",
        [
            [call("restart_service", service="search"), call("list_users")],
            [call("restart_service", service="search")],
        ],
    )


def test_an_answer_decides_the_call_and_nothing_runs_after_it(history: PromiseMachine) -> None:
    """**Answer instead** is a decision like a rejection: an approval after it (on the screen
    that still shows the buttons) counts for nothing, and the tool never runs."""
    history.begin("strict", "UALICE", [[call("drop_table", name="tmp_a", force=False)]])
    history.click(0, "UBOB", "answer")
    history.click(0, "UCAROL", "approve")
    history.click(0, "UCAROL", "note")
    assert all(e.tool != "drop_table" for e in world.LEDGER)


def test_a_note_approves_like_approve_and_the_tool_runs_once(history: PromiseMachine) -> None:
    history.begin("strict", "UALICE", [[call("drop_table", name="tmp_a", force=False)]])
    history.click(0, "UALICE", "note")  # her own request: refused, nothing runs
    assert all(e.tool != "drop_table" for e in world.LEDGER)
    history.click(0, "UBOB", "note")
    history.click(0, "UCAROL", "answer")  # too late: the call was decided
    assert [e.tool for e in world.LEDGER].count("drop_table") == 1
