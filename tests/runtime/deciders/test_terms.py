"""A rule's resolved fields (`runtime.deciders.Terms`) reach every shape that carries them: the
rule as written in the policy file, as resolved for a call, the waiting call, its gate, a gate
rewritten under a stricter rule; and the fields of a gate the decision scripts read are fields
`CallGate` writes."""

from __future__ import annotations

import re
import time
from dataclasses import fields, replace
from pathlib import Path

from runtime.deciders import TERMS, Terms, asks_more
from runtime.jobs.contracts import Conversation, new_approval_id, new_run_id
from runtime.policy import Rule
from runtime.record.call_rule import CallRule
from runtime.record.envelope import PendingCall, RunEnvelope
from runtime.record.layout import CallGate

LUA = Path(__file__).resolve().parents[3] / "runtime" / "record" / "lua"

RENAMED = {"name": "rule_name"}
"""A call and its gate name the rule's `name` for what it is there."""
GATE_ONLY = ("escalate_after_seconds", "escalate_to")
"""A call's escalation is planned with it (`CallReach`), not kept in its envelope."""


def test_the_names_are_the_protocols() -> None:
    declared = {
        name
        for protocol in Terms.__mro__
        for name, value in vars(protocol).items()
        if isinstance(value, property)
    }
    assert set(TERMS) == declared


def test_every_shape_has_every_field() -> None:
    written = set(Rule.model_fields)
    rule = {f.name for f in fields(CallRule)}
    call = set(PendingCall.model_fields)
    gate = set(CallGate.model_fields)
    assert set(TERMS) <= written
    assert set(TERMS) <= rule
    assert {RENAMED.get(n, n) for n in TERMS if n not in GATE_ONLY} <= call
    who = {"users", "groups", "anyone"}
    assert {RENAMED.get(n, n) for n in TERMS if n != "approvers"} | who <= gate


def test_a_stricter_rules_terms_reach_the_gate_and_the_card() -> None:
    """Each field set to a value no default has, so that one left behind shows."""
    envelope = RunEnvelope(
        run_id=new_run_id(),
        root_agent="ops",
        task="t",
        created_at=time.time(),
        conversation=Conversation(channel="C1", requester="UREQ", thread="1.1"),
    )
    call = PendingCall(
        approval_id=new_approval_id(),
        call_id="c",
        tool="refund",
        agent="ops",
        arguments='{"order_id": "A-1"}',
        expires_at=time.time() + 60,
        approvers=("UANN",),
        allow_always=True,
        allow_edit=True,
        grant_max_seconds=3600,
        digest="d",
    )
    stricter = CallRule(
        approvers=("UBOB", "SOPS"),
        quorum=3,
        ttl_seconds=60,
        allow_always=False,
        auto=None,
        grant_max_seconds=0,
        allow_edit=False,
        answer=False,
        external=True,
        confirm="order_id",
        when="amount > 100",
        name="Large refunds",
        escalate_after_seconds=600,
        escalate_to=("SLEADS",),
    )
    gate = CallGate.of(envelope, call, self_ok=False).regated_to(stricter, call.arguments, "e")
    shown = gate.applied_to(call)
    assert (gate.users, gate.groups, gate.anyone) == (("UBOB",), ("SOPS",), False)
    assert gate.confirm_value == "A-1"
    for name in TERMS:
        there = RENAMED.get(name, name)
        if name != "approvers":
            assert getattr(gate, there) == getattr(stricter, name), name
        if name not in GATE_ONLY:
            assert getattr(shown, there) == getattr(stricter, name), name
    # And a call's own terms reach its gate as they are (its rule's `when` and `name` stay
    # with the call: a gate names them only once an edit moved it under another rule).
    first = CallGate.of(envelope, shown, self_ok=False)
    assert (*first.users, *first.groups) == shown.approvers
    for name in TERMS:
        if name not in (*GATE_ONLY, "approvers", "when", "name"):
            there = RENAMED.get(name, name)
            assert getattr(first, there) == getattr(shown, there), name


def test_the_scripts_read_only_fields_a_gate_has() -> None:
    read: set[str] = set()
    for script in LUA.glob("*.lua"):
        read |= set(re.findall(r"\bgate\['(\w+)'\]", script.read_text()))
    assert read, "no script reads a gate: the pattern is stale"
    assert read <= set(CallGate.model_fields), read - set(CallGate.model_fields)


def test_an_edit_asks_more_under_a_rule_that_narrows_who_decides() -> None:
    call = PendingCall(
        approval_id=new_approval_id(),
        call_id="c",
        tool="refund",
        agent="ops",
        arguments="{}",
        expires_at=0,
        approvers=("UANN", "UBOB"),
        external=True,
    )
    same = CallRule(
        approvers=("UBOB", "UANN"),
        quorum=1,
        ttl_seconds=60,
        allow_always=True,
        auto=None,
        external=True,
    )
    assert not asks_more(same, call)
    assert not asks_more(replace(same, approvers=()), call)  # anyone: asks no more
    assert asks_more(replace(same, quorum=2), call)
    assert asks_more(replace(same, external=False), call)
    assert asks_more(replace(same, confirm="order_id"), call)
    assert asks_more(replace(same, approvers=("UANN",)), call)
