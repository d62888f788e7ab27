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
        pytest.param(
            '[[rule]]\ntool = "a"\n\n[[rule]]\ntool = "b"\napprovers = []\n',
            "line 6: rule 2 `approvers` is empty",
            id="empty-approvers",
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\nanyone = true\nexternal = "sometimes"\n',
            "line 4: rule 1 `external`: must be true or false, without quotes",
            id="external-not-a-boolean",
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\nanyone = true\napprovers = ["U0LEAD"]\n',
            "line 3: rule 1 `anyone = true` with `approvers`",
            id="anyone-and-approvers",
        ),
        pytest.param(
            '[[rule]]\ntool = "a"\napprovers = ["U0AMY", "U0BEN", "U0AMY"]\nquorum = 3\n',
            "line 4: rule 1 `quorum` is 3, but only 2 people",
            id="quorum-beyond-the-users",
        ),
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


def test_anyone_must_be_said_and_then_overrides_the_environment(tmp_path: Path) -> None:
    text = '[[rule]]\ntool = "list_*"\nanyone = true\nquorum = 3\n'
    policy = policy_from(tmp_path, text, APPROVERS="U0ADMIN")
    rule = policy.rule_for("list_users", "ops")
    assert (rule.approvers, rule.quorum) == ((), 3), "anyone in the channel, three of them"
    assert policy.rule_for("delete_user", "ops").approvers == ("U0ADMIN",)


def test_a_quorum_with_groups_or_the_environments_users_is_checked_as_far_as_known(
    tmp_path: Path,
) -> None:
    groups = '[[rule]]\ntool = "a"\napprovers = ["U0AMY", "S0SRE"]\nquorum = 5\n'
    assert policy_from(tmp_path, groups).rule_for("a", "ops").quorum == 5, "groups may be big"
    with pytest.raises(PolicyError, match="line 3: rule 1 `quorum` is 2, but only 1 person"):
        policy_from(tmp_path, '[[rule]]\ntool = "a"\nquorum = 2\n', APPROVERS="U0AMY")


def test_the_documented_example_is_a_valid_policy(tmp_path: Path) -> None:
    policy_md = (Path(__file__).resolve().parents[3] / "docs" / "policy.md").read_text()
    example = policy_md.split("```toml\n", 1)[1].split("```", 1)[0]
    policy = policy_from(tmp_path, example)
    assert policy.rule_for("lookup_order", "ops").approvers == ()
    assert policy.rule_for("delete_user", "ops").quorum == 2


def test_only_members_of_the_workspace_decide_unless_the_policy_says_otherwise(
    tmp_path: Path,
) -> None:
    text = (
        '[[rule]]\ntool = "lookup_*"\nanyone = true\nexternal = true\n\n'
        '[[rule]]\ntool = "delete_*"\nanyone = true\nexternal = false\n\n'
        '[[rule]]\ntool = "restart_*"\nanyone = true\n'
    )
    members_only = policy_from(tmp_path, text)
    assert members_only.rule_for("lookup_user", "ops").external is True
    assert members_only.rule_for("restart_service", "ops").external is False
    assert members_only.rule_for("anything", "ops").external is False
    allowed = policy_from(tmp_path, text, EXTERNAL_DECIDERS="allow")
    assert allowed.rule_for("restart_service", "ops").external is True
    assert allowed.rule_for("anything", "ops").external is True
    assert allowed.rule_for("delete_user", "ops").external is False, "the rule wins"


def test_each_problem_is_one_line_with_its_line_field_and_what_to_write(tmp_path: Path) -> None:
    text = (
        '[[rule]]\ntool = "delete_user"\nqorum = 2\n\n'
        '[[rule]]\ntool = "restart_service"\nquorum = "two"\nwhen = "args.force &&"\n'
        'auto = "yes"\n\n[[rule]]\napprovers = "U0LEAD"\n'
    )
    with pytest.raises(PolicyError) as raised:
        policy_from(tmp_path, text)
    where = f"POLICY_FILE={tmp_path / 'policy.toml'}"
    assert str(raised.value).splitlines() == [
        f"{where}: line 3: rule 1 `qorum`: unknown key; did you mean `quorum`?",
        f"{where}: line 7: rule 2 `quorum`: must be a whole number, without quotes",
        f'{where}: line 9: rule 2 `auto`: must be "approve" or "reject"',
        f"{where}: line 8: rule 2 `when`: at 1:14: Syntax error: mismatched input '<EOF>'",
        f"{where}: line 11: rule 3 `tool`: missing: every rule names its tool (a glob), e.g. "
        'tool = "delete_*"',
        f'{where}: line 12: rule 3 `approvers`: must be a list in brackets, e.g. ["U024BE7LH"]',
    ]
    for noise in ("Value error", "Input should", "input_value", "For further information"):
        assert noise not in str(raised.value)
