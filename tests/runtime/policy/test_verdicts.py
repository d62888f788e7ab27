"""The judging module on its own (`runtime.judging`): arguments as the tool receives them,
comparisons strict about types, the stricter of two rules when a `when` cannot be judged, each
`when` within its budget and off the event loop, and the verdict a call gets."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from pathlib import Path
from typing import Any

import cel
import pytest
from agents import function_tool

from runtime.conditions import CallFacts, Condition, ConditionError
from runtime.jobs.contracts import Conversation
from runtime.judging.arguments import ArgumentSchema, JudgedArguments
from runtime.judging.comparisons import strict_functions, strict_source
from runtime.judging.evaluation import WHEN_MAX_CHARS
from runtime.judging.tool_schemas import function_tool_schema
from runtime.policy import Policy, load_policy
from runtime.policy.verdicts import judge
from runtime.record.call_rule import CallRule, Unjudged, stricter
from runtime.settings import RuntimeSettings


@function_tool(needs_approval=True)
def drop_table(name: str, force: bool = False, rows: int = 0) -> str:
    """Drop a table."""
    return name


DROP = function_tool_schema(drop_table)


@pytest.mark.parametrize(
    ("sent", "text", "problem"),
    [
        pytest.param('{"name": "users", "force": true}', None, None, id="well-typed-unchanged"),
        pytest.param('{ "name":"users" }', None, None, id="spacing-kept"),
        pytest.param(
            '{"name": "a", "force": "true"}',
            '{"name": "a", "force": true}',
            None,
            id="string-to-bool",
        ),
        pytest.param(
            '{"name": "a", "rows": "150000"}',
            '{"name": "a", "rows": 150000}',
            None,
            id="string-to-int",
        ),
        pytest.param(
            '{"name": "a", "force": 1}', '{"name": "a", "force": true}', None, id="number-to-bool"
        ),
        pytest.param(
            '{"name": "a", "rows": "lots"}', None, "`rows`: Input should be a valid", id="invalid"
        ),
        pytest.param('{"force": true}', None, "`name`: Field required", id="missing"),
        pytest.param("[1]", None, "they are not a JSON object", id="not-an-object"),
    ],
)
def test_arguments_are_judged_as_the_tool_receives_them(
    sent: str, text: str | None, problem: str | None
) -> None:
    judged = DROP.judged(sent)
    assert judged.text == (text or sent)
    if problem is None:
        assert judged.problem is None
    else:
        assert judged.problem is not None and judged.problem.startswith(problem)


def test_a_tool_that_converts_nothing_is_checked_against_its_schema_only() -> None:
    schema = ArgumentSchema.of_json_schema(
        {"type": "object", "properties": {"force": {"type": "boolean"}}}
    )
    judged = schema.judged('{"force": "true"}')
    assert judged.text == '{"force": "true"}', "the server gets the text as it is"
    assert judged.problem == "`force`: 'true' is not of type 'boolean'"
    assert ArgumentSchema().judged("free text") == JudgedArguments(text="free text")


@pytest.mark.parametrize(
    ("source", "variables", "holds"),
    [
        ("args.force == true", {"force": True}, True),
        ("args.force != true", {"force": False}, True),
        ("args.region in ['eu', 'us']", {"region": "eu"}, True),
        ("args.n == 1 && args.x == null", {"n": 1.0, "x": None}, True),
        ("args.tags == ['a', 'b']", {"tags": ["a", "b"]}, True),
        ("args.items.exists(i, i.name == 'x')", {"items": [{"name": "y"}, {"name": "x"}]}, True),
        ("has(args.force) && args.force == true", {}, False),
        ("(args.a == 1) == (args.b == 2)", {"a": 1, "b": 3}, False),
    ],
)
def test_strict_comparisons_agree_with_cel_on_values_of_one_type(
    source: str, variables: dict[str, Any], holds: bool
) -> None:
    context = cel.Context(variables={"args": variables}, functions=strict_functions([]))
    assert cel.compile(strict_source(source)).execute(context) is holds
    assert cel.compile(source).execute({"args": variables}) is holds


@pytest.mark.parametrize(
    ("source", "variables", "words"),
    [
        ("args.force == true", {"force": "true"}, "a string with a boolean"),
        ("args.region in ['eu']", {"region": 1}, "a number with a string"),
        ("args.tags == [true]", {"tags": [1]}, "a number with a boolean"),
    ],
)
def test_a_comparison_of_different_types_refuses(
    source: str, variables: dict[str, Any], words: str
) -> None:
    assert cel.compile(source).execute({"args": variables}) is False, "CEL: quietly false"
    refused: list[str] = []
    context = cel.Context(variables={"args": variables}, functions=strict_functions(refused))
    with pytest.raises(RuntimeError):
        cel.compile(strict_source(source)).execute(context)
    assert refused == [words]


async def test_a_when_that_cannot_be_judged_says_why() -> None:
    def facts(arguments: str | None) -> CallFacts:
        return CallFacts(arguments=arguments, tool="t", agent="a")

    force = Condition.compile("args.force == true")
    assert (await force.holds(facts('{"force": true}'))).holds is True
    outcome = await force.holds(facts('{"force": "true"}'))
    assert (outcome.holds, outcome.reason) == (None, "it compares a string with a boolean")
    assert (await force.holds(facts("{}"))).reason == "the call has no `force`"
    assert (await force.holds(facts(None))).reason == "the call's arguments are not known"
    assert (await force.holds(facts("[]"))).reason == "the arguments are not a JSON object"
    big = json.dumps({"force": True, "pad": "x" * WHEN_MAX_CHARS})
    assert "characters long" in str((await force.holds(facts(big))).reason)
    divide = Condition.compile("1 / args.n > 0")
    assert (await divide.holds(facts('{"n": 0}'))).reason == "it fails (division by zero)"


async def test_a_slow_when_is_over_budget_and_the_loop_keeps_running() -> None:
    slow = Condition.compile("args.a.exists(x, args.a.exists(y, x == y + 100000))")
    facts = CallFacts(arguments=json.dumps({"a": list(range(3000))}), tool="t", agent="a")
    await Condition.compile("true").holds(facts)  # the child started
    beats: list[float] = []

    async def heartbeat() -> None:
        while True:
            beats.append(time.monotonic())
            await asyncio.sleep(0.01)

    beating = asyncio.create_task(heartbeat())
    try:
        outcome = await slow.holds(facts)
    finally:
        beating.cancel()
    assert outcome.holds is None and str(outcome.reason).startswith("it took longer than")
    gaps = [later - earlier for earlier, later in itertools.pairwise(beats)]
    assert max(gaps) < 0.5, "the event loop was never held"
    # The child was replaced: the next expression is judged as usual.
    assert (await Condition.compile("args.a.size() > 2").holds(facts)).holds is True


def test_an_expression_whose_comparisons_cannot_be_made_strict_is_refused() -> None:
    with pytest.raises(ConditionError):
        Condition.compile("args.x ==")


RULE = CallRule(
    approvers=("UANN", "UBOB"),
    quorum=1,
    ttl_seconds=600,
    allow_always=True,
    auto=None,
    grant_max_seconds=3600,
    notify=("C1",),
)
WHY = Unjudged(rule="big ones", reason="the call has no `amount`", index=0)


def test_the_stricter_of_two_rules_field_by_field() -> None:
    unjudged = CallRule(
        approvers=("UBOB", "UCAT", "UANN"),
        quorum=2,
        ttl_seconds=300,
        allow_always=True,
        auto=None,
        confirm="name",
        notify=("C2",),
        escalate_after_seconds=60,
        escalate_to=("UDAN",),
        external=True,
    )
    both = stricter(unjudged, RULE, WHY)
    assert both.approvers == ("UBOB", "UANN") and both.quorum == 2
    assert (both.auto, both.refusal, both.confirm) == (None, None, "name")
    assert (both.allow_always, both.grant_max_seconds, both.external) == (False, 0, False)
    assert both.ttl_seconds == 300 and both.notify == ("C2", "C1")
    assert (both.escalate_after_seconds, both.escalate_to) == (None, ()), "it would widen"
    too_few = stricter(
        unjudged.__class__(**{**_fields(unjudged), "approvers": ("UBOB",)}), RULE, WHY
    )
    assert (too_few.auto, too_few.refusal) == (
        "reject",
        "2 approvals are needed but only 1 person is allowed by both",
    )


def _fields(rule: CallRule) -> dict[str, Any]:
    return {name: getattr(rule, name) for name in rule.__dataclass_fields__}


def test_no_loosening_survives_a_rule_that_cannot_be_judged() -> None:
    approving = CallRule(
        approvers=(),
        quorum=1,
        ttl_seconds=900,
        allow_always=True,
        auto="approve",
        grant_max_seconds=86400,
    )
    both = stricter(approving, RULE, WHY)
    assert (both.auto, both.allow_always, both.grant_max_seconds) == (None, False, 0)
    assert both.approvers == RULE.approvers, "anyone, with bob and ann: bob and ann"
    assert both.ttl_seconds == 600 and both.notify == ("C1",)
    assert both.unjudged == (WHY,)
    rejecting = CallRule(
        approvers=("UZED",), quorum=1, ttl_seconds=900, allow_always=True, auto="reject"
    )
    assert stricter(rejecting, RULE, WHY).auto == "reject", "a rejection wins"
    nobody = stricter(
        CallRule(approvers=("UZED",), quorum=1, ttl_seconds=900, allow_always=False, auto=None),
        RULE,
        WHY,
    )
    assert (nobody.auto, nobody.refusal) == (
        "reject",
        "no approver is allowed by both",
    )
    typed = stricter(
        CallRule(
            approvers=(), quorum=1, ttl_seconds=900, allow_always=False, auto=None, confirm="name"
        ),
        RULE,
        WHY,
    )
    assert typed.confirm == "name" and typed.auto is None


def policy_of(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(path)}))


async def test_the_verdict_of_a_call(tmp_path: Path) -> None:
    policy = policy_of(
        tmp_path,
        '[[rule]]\nname = "small"\ntool = "refund"\nwhen = "args.cents <= 100"\nanyone = true\n'
        '[[rule]]\ntool = "refund"\napprovers = ["UANN"]\n',
    )
    members = Conversation(channel="C1", requester="UREQ")

    async def verdict(arguments: str, conversation: Conversation = members) -> Any:
        return await judge(
            policy,
            tool="refund",
            agent="ops",
            mcp_server=None,
            arguments=JudgedArguments(text=arguments),
            conversation=conversation,
        )

    small = await verdict('{"cents": 50}')
    assert small.rule.approvers == () and small.rule.allow_always
    assert small.key is not None and small.key.rule == 0 and small.key.policy == policy.version
    unknown = await verdict('{"cents": "50"}')
    assert unknown.rule.approvers == ("UANN",) and unknown.key is None
    assert [u.rule for u in unknown.rule.unjudged] == ["small"]
    outsider = Conversation(channel="C1", requester="UGUEST", requester_external=True)
    theirs = await verdict('{"cents": 50}', outsider)
    assert theirs.rule.approvers == () and theirs.key is None, "the same rule, nothing looser"
    assert (theirs.rule.allow_always, theirs.rule.grant_max_seconds) == (False, 0)
    invalid = await judge(
        policy,
        tool="refund",
        agent="ops",
        mcp_server=None,
        arguments=JudgedArguments(text='{"cents": 50}', problem="`cents`: too small"),
        conversation=members,
    )
    assert invalid.key is None and not invalid.rule.allow_always
