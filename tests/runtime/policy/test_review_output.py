"""A rule's `review_output` and `review_output_when` (issue 35, part 3): which calls have their
output held for a person, judged on the call's arguments like `when`; one that cannot be judged
holds it (the stricter), and a bad expression stops the policy from loading, with its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runtime.conditions import CallFacts
from runtime.policy import Policy, PolicyError, load_policy
from runtime.settings import RuntimeSettings

POLICY = """
[[rule]]
tool = "read_*"
when = "args.region == 'eu'"
review_output = true

[[rule]]
tool = "read_customer"
review_output_when = "args.table == 'customers'"

[[rule]]
tool = "read_*"
"""


def loaded(tmp_path: Path, text: str) -> Policy:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(path)}))


async def held(policy: Policy, tool: str, **arguments: object) -> bool:
    facts = CallFacts(
        arguments=json.dumps(arguments),
        tool=tool,
        agent="ops",
        mcp_server=None,
        channel="C1",
        requester="UALICE",
    )
    return await policy.reviews_output(await policy.judge(facts), facts)


async def test_review_output_when_is_judged_on_the_calls_arguments(tmp_path: Path) -> None:
    policy = loaded(tmp_path, POLICY)
    assert await held(policy, "read_customer", region="us", table="customers")
    assert not await held(policy, "read_customer", region="us", table="orders")
    assert await held(policy, "read_orders", region="eu"), "review_output = true"
    assert not await held(policy, "read_orders", region="us")


async def test_what_cannot_be_judged_holds_the_output(tmp_path: Path) -> None:
    policy = loaded(tmp_path, POLICY)
    # No `table`: its review_output_when cannot be judged, so the output is held.
    assert await held(policy, "read_customer", region="us")
    # No `region`: the first rule may apply, so its review_output does.
    assert await held(policy, "read_orders")


def test_a_bad_review_output_when_names_its_line(tmp_path: Path) -> None:
    text = '[[rule]]\ntool = "read_*"\nreview_output_when = "args.table =="\n'
    with pytest.raises(PolicyError, match="line 3"):
        loaded(tmp_path, text)
