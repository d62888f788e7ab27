"""The backtest's summary as a person reads it: outcomes in words, people by name where known, the
range without its date twice."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from dataclasses import replace

from runtime.review.backtest import Summary, Verdict
from runtime.review.history import PastCall
from tests.support.processes import ROOT

MORNING = dt.datetime(2026, 12, 5, 7, 45, 32, tzinfo=dt.UTC).timestamp()


def granted_call(at: float) -> PastCall:
    return PastCall(
        run_id="r1",
        approval_id="a1",
        call_id="c1",
        tool="delete_user",
        agent="ops",
        mcp_server=None,
        channel="CDEMO",
        requester="UALICE",
        digest="0" * 64,
        at=at,
        arguments=None,
        arguments_note=None,
        approvers=None,
        quorum=None,
        was="granted",
    )


def test_a_call_a_grant_approved_that_would_now_ask_reads_in_words() -> None:
    summary = Summary(source="proposal.toml")
    verdict = Verdict(
        would="ask", rule="proposal.toml:3", approvers=("UBOB", "UCAROL"), quorum=1, changes=()
    )
    for at in (MORNING, MORNING + 62):
        summary.add(granted_call(at), replace(verdict, changes=("asks",)))
    text = summary.text({"UBOB": "@bob"})

    assert "2 past call(s), 2026-12-05 07:45:32 to 07:46:34 UTC." in text, "the date once"
    [asks] = [line for line in text.splitlines() if "would ask a person" in line]
    assert "(none was asked)" in asks and "(asked nobody)" not in asks
    assert asks.endswith("2  (were: 2 approved by a grant)"), asks
    assert "delete_user (ops): was approved by a grant, would ask @bob, UCAROL" in text
    assert summary.principals() == {"UBOB", "UCAROL"}


def test_a_range_over_two_days_shows_both_dates() -> None:
    summary = Summary(source="p.toml")
    verdict = Verdict(would="ask", rule=None, approvers=(), quorum=1, changes=())
    summary.add(granted_call(MORNING), verdict)
    summary.add(granted_call(MORNING + 86400), verdict)
    assert "2026-12-05 07:45:32 to 2026-12-06 07:45:32 UTC" in summary.text()


def test_the_backtest_command_does_not_load_the_agents_sdk() -> None:
    """The backtest of the demo's dozen calls took 3-4 s, nearly all of it importing the Agents
    SDK, which only `runtime policy check` needs (to read the registry)."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, runtime.__main__; print('agents' in sys.modules)"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "False"
