"""`python -m runtime policy check POLICY.toml` (issue 21 item 2): warnings about rules that can
never match, globs that match nothing the registry offers, and `anyone = true` on a tool an
earlier rule guards; exit 0 unless the file is invalid. Run as a process on the example
agents (`runtime.examples:AGENTS`: ops with the MCP server `db`, billing)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runtime.review.check import glob_covers, globs_meet
from runtime.review.when_check import when_problems
from tests.support.processes import ROOT

PROPOSAL = """
[[rule]]
tool = "delete_*"
approvers = ["U0SRE"]

[[rule]]
tool = "delete_user"
auto = "reject"

[[rule]]
tool = "restart_*"
agent = "ops"
approvers = ["U0OPS"]

[[rule]]
tool = "restart_service"
anyone = true

[[rule]]
tool = "frobnicate"

[[rule]]
tool = "*"
mcp_server = "dbx"

[[rule]]
tool = "refund_order"
agent = "bill*"
notify = ["UCAROL"]
"""


def check(path: Path, text: str) -> subprocess.CompletedProcess[str]:
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "runtime", "policy", "check", str(path)],
        cwd=ROOT,
        env={**os.environ, "AGENTS": "runtime.examples:AGENTS"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_each_problem_is_a_warning_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "proposal.toml"
    done = check(path, PROPOSAL)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"warning: {path}:6: this rule never matches: rule 1 ({path}:2) matches every call "
        "it would.",
        f"warning: {path}:15: `anyone = true` on `restart_service`, which rule 3 ({path}:10) "
        "guards: the channel may decide the calls that rule does not match.",
        f"warning: {path}:19: tool `frobnicate` matches no tool of its agents (unless MCP "
        "server db offers it).",
        f"warning: {path}:22: mcp_server `dbx` matches no MCP server of its agents (db).",
        f"{path}: 7 rule(s), 4 warning(s)",
    ]


def test_the_demos_policy_has_no_warnings(tmp_path: Path) -> None:
    demo = (ROOT / "bot" / "console" / "demo_policy.toml").read_text()
    done = check(tmp_path / "demo.toml", demo)
    assert (done.returncode, done.stdout) == (
        0,
        f"{tmp_path / 'demo.toml'}: 6 rule(s), 0 warning(s)\n",
    )


WHEN = """
[[rule]]
tool = "delete_user"
when = "args.user_idd == 'u-1'"
auto = "approve"

[[rule]]
tool = "refund_order"
name = "odd"
when = "args.order_id > 3 || args.amount_cents > '100'"
approvers = ["U0LEAD"]

[[rule]]
tool = "refund_order"
when = "args.amount_cents > 100000 && has(args.order_id)"
approvers = ["U0LEAD"]

[[rule]]
tool = "*"
when = "args.service == 'api'"
approvers = ["U0LEAD"]
"""


def test_a_when_that_would_fail_on_its_tools_arguments_is_a_warning_on_its_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "when.toml"
    done = check(path, WHEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"warning: {path}:4: `args.user_idd`: `delete_user` has no argument `user_idd`; "
        "did you mean `user_id`?",
        f"warning: {path}:10: `args.order_id > 3` compares `args.order_id`, a string in "
        "`refund_order`, with a number: CEL does not convert between them, so the rule cannot "
        "be evaluated.",
        f"warning: {path}:10: `args.amount_cents > '100'` compares `args.amount_cents`, a "
        "number in `refund_order`, with a string: CEL does not convert between them, so the "
        "rule cannot be evaluated.",
        f"warning: {path}:20: `args.service`: `list_users`, `delete_user`, `respond_spanish`, "
        "`refund_order`, `get_user_name` have no argument `service`.",
        f"{path}: 4 rule(s), 4 warning(s)",
    ]


def test_a_when_is_checked_by_the_cel_evaluator_where_no_literal_shows_the_types() -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array"}},
        "additionalProperties": False,
    }
    [problem] = when_problems("args.name + 1 > 2", {"tag": schema})
    assert problem == (
        "it cannot be evaluated on `tag`'s arguments (`args.name` a string): "
        "Unsupported operation: string + int."
    )
    assert when_problems("args.name.size() > 2 && 'x' in args.tags", {"tag": schema}) == []
    assert when_problems('"args.nope" == tool', {"tag": schema}) == [], "a string, not a field"


def test_an_invalid_file_exits_2_with_its_line(tmp_path: Path) -> None:
    done = check(tmp_path / "bad.toml", '[[rule]]\ntool = "x"\napprovers = []\n')
    assert done.returncode == 2 and done.stdout == ""
    assert "line 3" in done.stderr and "anyone = true" in done.stderr


def test_globs_are_compared_as_the_names_they_match() -> None:
    assert glob_covers("delete_*", "delete_u*") and glob_covers("*", "a?c")
    assert glob_covers("*_user", "delete_user") and glob_covers("d?l*", "del[ae]te")
    assert not glob_covers("delete_u*", "delete_*")
    assert not glob_covers("*ab*", "a*b"), "acb matches a*b, not *ab*"
    assert not glob_covers("restart_?", "restart_*")
    assert globs_meet("delete_*", "*_user") and globs_meet("a*", "*b")
    assert not globs_meet("delete_*", "restart_*") and not globs_meet("a?", "abc")


def test_a_review_output_when_is_checked_like_a_when_on_its_own_line(tmp_path: Path) -> None:
    path = tmp_path / "review.toml"
    text = '[[rule]]\ntool = "delete_user"\nreview_output = false\n'
    done = check(path, text + "review_output_when = \"args.user_idd == 'u-1'\"\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (
        f"warning: {path}:4: `args.user_idd`: `delete_user` has no argument `user_idd`; "
        "did you mean `user_id`?"
    )
