"""A policy file's problems in words (`runtime.policy`).

pydantic's messages are written for Python programmers ("Input should be a valid integer,
unable to parse string as an integer", "Value error, …"): a person editing TOML gets what to
write instead, and for a mistyped key the one they meant.
"""

from __future__ import annotations

import difflib

_POLICY_REASONS = {
    "missing": "missing: every rule needs it",
    "int_type": "must be a whole number, without quotes",
    "int_parsing": "must be a whole number, without quotes",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false, without quotes",
    "bool_parsing": "must be true or false, without quotes",
    "string_type": "must be text in quotes",
    "string_too_short": "must not be empty",
    "tuple_type": 'must be a list in brackets, e.g. ["U024BE7LH"]',
    "list_type": 'must be a list in brackets, e.g. ["U024BE7LH"]',
}


def plain_reason(problem: dict[str, object], fields: list[str]) -> str:
    """What is wrong, and what to write instead, in words: pydantic's own messages are written
    for Python programmers ("Input should be a valid integer, unable to parse string")."""
    kind, loc = str(problem["type"]), problem["loc"]
    context = problem.get("ctx")
    ctx = context if isinstance(context, dict) else {}
    key = str(loc[-1]) if isinstance(loc, tuple) and loc else ""
    if kind == "extra_forbidden":
        close = difflib.get_close_matches(key, fields, n=1)
        return "unknown key" + (f"; did you mean `{close[0]}`?" if close else "")
    if kind == "missing" and key == "tool":
        return 'missing: every rule names its tool (a glob), e.g. tool = "delete_*"'
    if kind in _POLICY_REASONS:
        return _POLICY_REASONS[kind]
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        words = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}
        bound = next((f"{words[b]} {ctx[b]}" for b in words if b in ctx), "")
        return f"must be {bound}" if bound else str(problem["msg"])
    if kind == "literal_error":
        return f"must be {str(ctx.get('expected', '')).replace(chr(39), chr(34))}"
    message = str(problem["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    # The CEL parser's own message spans lines (a caret under the expression) and lists every
    # token it expected: the first line, up to that list, says where and what.
    first = message.splitlines()[0] if message else kind
    return first.split(" expecting {")[0]
