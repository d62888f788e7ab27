"""Who answers an MCP server's questions: `elicitation_responders`, a server's rule's list."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.policy import PolicyError, responders_for
from tests.runtime.policy.test_policy_file import policy_from

SERVERS = """
[[rule]]
tool = "refund"
mcp_server = "billing"
auto = "approve"
elicitation_responders = ["S0FINANCE", "U0CAROL"]

[[rule]]
tool = "*"
mcp_server = "billing*"
approvers = ["U0BOB"]
"""


def test_the_first_rule_matching_the_calls_names_with_a_list_says_who_answers(
    tmp_path: Path,
) -> None:
    rules = policy_from(tmp_path, SERVERS).rules
    assert responders_for(rules, "refund", "ops", "billing") == ("S0FINANCE", "U0CAROL")
    assert responders_for(rules, "refund", "ops", "billing-eu") == (), "the requester answers"
    assert responders_for(rules, "invoice", "ops", "billing") == ()


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ('tool = "*"\nelicitation_responders = ["U0CAROL"]', "needs `mcp_server` and no `when`"),
        (
            'tool = "*"\nmcp_server = "x"\nwhen = "args.a > 1"\nelicitation_responders = ["U0C1"]',
            "needs `mcp_server` and no `when`",
        ),
        ('tool = "*"\nmcp_server = "x"\nelicitation_responders = []', "is empty"),
        ('tool = "*"\nmcp_server = "x"\nelicitation_responders = ["carol"]', "not a Slack user"),
    ],
    ids=["no-server", "with-when", "empty", "not-an-id"],
)
def test_a_list_that_cannot_be_used_is_refused_with_its_line(
    tmp_path: Path, rule: str, problem: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from(tmp_path, f"[[rule]]\n{rule}\n")
    line = len(rule.splitlines()) + 1  # the list is the rule's last line
    assert problem in str(raised.value) and f"line {line}:" in str(raised.value)


def test_a_policy_without_the_list_keeps_its_version_so_approve_always_outlives_the_deploy() -> (
    None
):
    from runtime.policy import Policy, Rule

    rule = Rule.model_validate({"tool": "a", "approvers": ["U0A1"]})
    policy = Policy(rules=(rule,), default_approvers=(), default_ttl_seconds=10)
    assert policy.version == "8fe022cc07272f61", "the version before the list existed"
    listed = rule.model_copy(update={"elicitation_responders": ("U0A1",), "mcp_server": "x"})
    assert Policy(rules=(listed,), default_approvers=(), default_ttl_seconds=10).version != (
        policy.version
    )
