"""Reading the policy file (`POLICY_FILE`) over the environment's defaults: every problem a
line of its own, naming the file, the line and the key to fix."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import ValidationError

from runtime.deciders import too_few
from runtime.policy.file_lines import describe_problem, line_of
from runtime.policy.responders import PRINCIPAL_PATTERN, responders_problem
from runtime.policy.rules import (
    AUDIENCE_PATTERN,
    Policy,
    PolicyError,
    PolicyFile,
    Rule,
    parse_principals,
)
from runtime.settings import RuntimeSettings


def load_policy(settings: RuntimeSettings) -> Policy:
    """The policy file (if any) over the environment's defaults."""
    default_approvers = parse_principals(settings.approvers)
    rules, lines = (
        _read_rules(Path(settings.policy_file), default_approvers)
        if settings.policy_file
        else ((), ())
    )
    return Policy(
        rules=rules,
        rule_lines=lines,
        default_approvers=default_approvers,
        default_ttl_seconds=settings.approval_ttl_seconds,
        default_grant_max_seconds=settings.grant_max_seconds,
        default_external=settings.external_deciders == "allow",
        default_channel=settings.approval_channel,
    )


def _read_rules(
    path: Path, default_approvers: tuple[str, ...]
) -> tuple[tuple[Rule, ...], tuple[int, ...]]:
    try:
        text = path.read_text()
    except OSError as error:
        raise PolicyError(f"POLICY_FILE={path}: cannot read it ({error.strerror}).") from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"POLICY_FILE={path}: not valid TOML: {error}.") from error
    try:
        policy = PolicyFile.model_validate(data)
    except ValidationError as error:
        problems = [describe_problem(problem, text, Rule, PolicyFile) for problem in error.errors()]
        raise PolicyError("\n".join(f"POLICY_FILE={path}: {p}" for p in problems)) from error
    for number, rule in enumerate(policy.rule):
        name = f"rule {number + 1}"
        problem = responders_problem(rule, name) or _problem(rule, name, default_approvers)
        if problem is not None:
            key, reason = problem
            line = line_of(text, number, key)
            raise PolicyError(f"POLICY_FILE={path}: line {line}: {reason}")
    return policy.rule, tuple(line_of(text, n, None) for n in range(len(policy.rule)))


def _problem(rule: Rule, name: str, default_approvers: tuple[str, ...]) -> tuple[str, str] | None:
    """What is wrong with a rule that parsed, if anything: the key to point at, and why."""
    for principal in rule.approvers or ():
        if not re.match(PRINCIPAL_PATTERN, principal):
            return "approvers", f"{principal!r} is not a Slack user (U…, W…) or user-group (S…) id."
    for key in ("notify", "escalate_to"):
        for audience in getattr(rule, key):
            if not re.match(AUDIENCE_PATTERN, audience):
                return key, (
                    f"{audience!r} is not a Slack user (U…, W…), user-group (S…) or channel "
                    "(C…) id."
                )
    if rule.anyone:
        if rule.approvers:
            return "anyone", (
                f"{name} `anyone = true` with `approvers`: say who may decide, or that anyone may."
            )
        return None
    if rule.approvers == ():
        # An empty list used to mean "anyone": too easy to write by accident (a list emptied
        # while editing) for a rule that opens a tool to the whole channel.
        return "approvers", (
            f"{name} `approvers` is empty. List who may decide, or write `anyone = true` to let "
            "anyone in the channel decide."
        )
    approvers = default_approvers if rule.approvers is None else rule.approvers
    # With a group among them the count is only known at click time; with users only, now.
    if (few := too_few(approvers, rule.quorum)) is not None:
        people = "1 person" if few == 1 else f"{few} people"
        where = "" if rule.approvers is not None else " (APPROVERS)"
        return "quorum", (
            f"{name} `quorum` is {rule.quorum}, but only {people} may decide{where}, so no call "
            "could ever be approved. Lower the quorum or add approvers."
        )
    return None
