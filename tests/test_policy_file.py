"""The policy file: rules matched in order over the environment's defaults, errors by line."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.policy import Policy, PolicyError, load_policy
from runtime.settings import RuntimeSettings

EXAMPLE = """
# Deleting needs two SREs; restarting needs the on-call lead; listing needs nobody.
[[rule]]
tool = "delete_*"
approvers = ["S0SRE"]
quorum = 2
ttl_seconds = 900

[[rule]]
tool = "restart_service"
agent = "helper"
approvers = ["U0LEAD", "S0ONCALL"]
allow_always = true

[[rule]]
tool = "list_*"
auto = "approve"

[[rule]]
tool = "drop_*"
auto = "reject"
"""


def policy_from(tmp_path: Path, text: str, **environ: str) -> Policy:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(path), **environ}))


def test_rules_match_in_order_and_fill_in_the_defaults(tmp_path: Path) -> None:
    policy = policy_from(tmp_path, EXAMPLE, APPROVERS="U0ADMIN", APPROVAL_TTL_SECONDS="600")
    delete = policy.rule_for("delete_user", "ops")
    assert (delete.approvers, delete.quorum, delete.ttl_seconds) == (("S0SRE",), 2, 900)
    assert delete.allow_always is False, "a quorum is not waived by one person's 'always'"
    restart = policy.rule_for("restart_service", "helper")
    assert (restart.approvers, restart.allow_always, restart.ttl_seconds) == (
        ("U0LEAD", "S0ONCALL"),
        True,
        600,
    )
    other_agent = policy.rule_for("restart_service", "ops")
    assert (other_agent.approvers, other_agent.quorum) == (("U0ADMIN",), 1)
    assert policy.rule_for("list_users", "ops").auto == "approve"
    assert policy.rule_for("drop_table", "ops").auto == "reject"


def test_no_policy_file_means_the_environment_decides() -> None:
    policy = load_policy(RuntimeSettings.from_environ({"APPROVERS": "U0001, S0002"}))
    rule = policy.rule_for("anything", "ops")
    assert (rule.approvers, rule.quorum, rule.auto, rule.allow_always) == (
        ("U0001", "S0002"),
        1,
        None,
        True,
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            '[[rule]]\ntool = "x"\nquorum = "two"\n', "line 3: rule 1 `quorum`", id="wrong-type"
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\n\n[[rule]]\nquorum = 2\n',
            "line 4: rule 2 `tool`",
            id="missing-tool",
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\nauto = "maybe"\n', "line 3: rule 1 `auto`", id="bad-auto"
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\napprovers = ["alice"]\n',
            "line 3: 'alice' is not",
            id="bad-approver",
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\nquorum = 0\n', "line 3: rule 1 `quorum`", id="zero-quorum"
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\nmode = "strict"\n', "line 3: rule 1 `mode`", id="unknown-key"
        ),
        pytest.param('[[rule]\ntool = "a"\n', "not valid TOML", id="syntax"),
    ],
)
def test_an_invalid_policy_file_names_the_line_and_the_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from(tmp_path, text)
    assert expected in str(raised.value)
    assert str(tmp_path / "policy.toml") in str(raised.value)


def test_a_missing_policy_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read it"):
        load_policy(RuntimeSettings.from_environ({"POLICY_FILE": str(tmp_path / "nope.toml")}))
