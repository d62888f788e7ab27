"""Where a problem of the policy file is: its line, and what to write instead."""

from __future__ import annotations

import re

from pydantic import BaseModel

from runtime.judging.policy_file_words import plain_reason


def describe_problem(
    problem: object, text: str, rule: type[BaseModel], file: type[BaseModel]
) -> str:
    """One of pydantic's problems as one line: where (line, rule, key) and what to write."""
    assert isinstance(problem, dict)
    loc = problem["loc"]
    in_rule = len(loc) >= 2 and loc[0] == "rule" and isinstance(loc[1], int)
    reason = plain_reason(problem, list((rule if in_rule else file).model_fields))
    if in_rule:
        key = str(loc[2]) if len(loc) > 2 else None
        where = f"line {line_of(text, loc[1], key)}: rule {loc[1] + 1}"
        field = f" `{key}`" if key else ""
        return f"{where}{field}: {reason}"
    return f"{'.'.join(str(part) for part in loc) or 'file'}: {reason}"


def line_of(text: str, rule_index: int, key: str | None) -> int:
    """The line of `key` inside the rule_index-th `[[rule]]` table (or of its header)."""
    lines = text.splitlines()
    headers = [n for n, line in enumerate(lines) if line.strip() == "[[rule]]"]
    if rule_index >= len(headers):
        return 1
    start = headers[rule_index]
    end = headers[rule_index + 1] if rule_index + 1 < len(headers) else len(lines)
    if key is not None:
        for number in range(start, end):
            if re.match(rf"^\s*{re.escape(key)}\s*=", lines[number]):
                return number + 1
    return start + 1
