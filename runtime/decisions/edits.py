"""Edit, then approve: checking a person's edited arguments, describing the change, and telling
the model.

The web process checks an edit against the tool's schema (written with each call by the worker,
`PendingCall.params_schema`) before anything is recorded; the decision script stores it with its
digest (`runtime/record/lua/choices.lua`); the worker runs the tool with exactly the edited text,
bound by that digest (`runtime.runs.state_decisions`, `runtime.journal.invoker`), and puts
`edit_note`
before the tool's output, so the model's next turn knows what ran.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from runtime.calls.digest import ArgumentsTooLarge, check_arguments
from runtime.deciders import asks_more
from runtime.jobs.contracts import Conversation
from runtime.judging.arguments import JudgedArguments
from runtime.policy import Policy
from runtime.policy.verdicts import judge
from runtime.record.call_rule import CallRule
from runtime.record.choices import ArgumentEdit
from runtime.record.envelope import PendingCall

VALUE_CHARS = 120


@dataclass(frozen=True, kw_only=True, slots=True)
class Change:
    """One argument that differs: `where` is its key (`arguments` for the whole)."""

    where: str
    old: str
    new: str
    """JSON of the value, shortened; `(none)` when absent on that side."""


class InvalidEdit(Exception):
    """An edit that cannot be approved; the message says what to fix, for the person editing."""


NOT_EDITABLE = (
    "This tool's arguments cannot be edited: its schema is invalid, so an edit could not be "
    "checked. Approve or reject the call as it is."
)


def schema_checks(schema: dict[str, Any] | None) -> bool:
    """Whether edits can be checked against `schema` (None: there is none to check against).
    `Draft202012Validator(schema)` takes any schema and fails only while validating (a
    `TypeError` for `{"type": 12}`), or passes what it cannot read (`{"minimum": "x"}`):
    the schema is checked first, against the metaschema."""
    if schema is None:
        return True
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return False
    return True


def parse_edit(text: str, schema: dict[str, Any] | None) -> Any:
    """The edited arguments, parsed; raises InvalidEdit naming the first problem in a sentence
    (a modal's error is plain text: no Markdown, no Python quoting)."""
    if not schema_checks(schema):
        raise InvalidEdit(NOT_EDITABLE)
    try:
        check_arguments(text)  # before parsing: the parser recurses
    except ArgumentsTooLarge as error:
        raise InvalidEdit(str(error)) from error
    try:
        parsed = json.loads(text)
    except ValueError as error:
        line = getattr(error, "lineno", None)
        where = f" (line {line})" if line else ""
        raise InvalidEdit(f"This is not valid JSON{where}: {_reason(error)}.") from error
    if not isinstance(parsed, dict):
        raise InvalidEdit("The arguments must be a JSON object: { … }.")
    if schema is None:
        return parsed
    try:
        validator = Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))
    except Unresolvable as error:  # a `$ref` to nowhere: found only while validating
        raise InvalidEdit(NOT_EDITABLE) from error
    if errors:
        raise InvalidEdit(_sentence(errors[0]))
    return parsed


_TYPES = {
    "string": "text in quotes",
    "integer": "a whole number",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object { … }",
    "array": "a list [ … ]",
    "null": "null",
}
_BOUNDS = {
    "minimum": "at least",
    "exclusiveMinimum": "more than",
    "maximum": "at most",
    "exclusiveMaximum": "less than",
    "minLength": "at least {} characters long",
    "maxLength": "at most {} characters long",
    "minItems": "a list of at least {} items",
    "maxItems": "a list of at most {} items",
}


def _sentence(error: ValidationError) -> str:
    """A schema's complaint as a sentence: jsonschema's own messages quote as Python does
    (`'user_id' is a required property`, `7 is not of type 'string'`)."""
    path = ".".join(str(part) for part in error.absolute_path)
    name = path or "The arguments"
    # jsonschema types these as possibly unset; on an error of a validator they are its own.
    expected: Any = error.validator_value
    schema: Any = error.schema
    instance, kind = error.instance, str(error.validator)
    if kind == "required" and isinstance(instance, dict):
        missing = next((key for key in expected if key not in instance), "?")
        return f"{f'{path}.' if path else ''}{missing} is missing: the tool needs it."
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = list(schema.get("properties") or {}) if isinstance(schema, dict) else []
        extra = sorted(key for key in instance if key not in known)
        close = difflib.get_close_matches(extra[0], known, n=1) if extra else []
        hint = f" Did you mean {close[0]}?" if close else ""
        return f"The tool has no argument {', '.join(extra)}.{hint}"
    if kind == "type":
        wanted = [expected] if isinstance(expected, str) else list(expected)
        words = " or ".join(_TYPES.get(str(w), str(w)) for w in wanted)
        return f"{name} must be {words}, not {_show(instance)}."
    if kind == "enum":
        listed = ", ".join(_show(v) for v in expected)
        return f"{name} must be one of {listed}, not {_show(instance)}."
    if kind == "const":
        return f"{name} must be {_show(expected)}."
    if kind in _BOUNDS:
        bound = _BOUNDS[kind]
        said = bound.format(expected) if "{}" in bound else f"{bound} {_show(expected)}"
        return f"{name} must be {said}, not {_show(instance)}."
    return f"{name} is not what the tool takes ({kind})."


async def stricter_rule(
    policy: Policy, call: PendingCall, conversation: Conversation, arguments: str
) -> CallRule | None:
    """The rule the edited arguments fall under, judged like a new call's
    (`runtime.policy.verdicts`), when it asks more than the rule the call is under now: it
    blocks them, or asks a typed confirmation the call did not, a larger quorum, approvers of
    its own (some where anyone could decide), or no outsiders. Approving them under the looser
    rule would skip it. None: the call's own rule still covers them."""
    verdict = await judge(
        policy,
        tool=call.tool,
        agent=call.agent,
        mcp_server=call.mcp_server,
        # Checked against the tool's schema already (`parse_edit`): as the tool receives them.
        arguments=JudgedArguments(text=arguments),
        conversation=conversation,
    )
    rule = verdict.rule
    if rule.auto == "reject":
        return rule
    if rule.auto == "approve":
        return None
    return rule if asks_more(rule, call) else None


def pretty_arguments(arguments: str) -> str:
    """Pretty JSON, as a person reads and edits it (unchanged if not JSON)."""
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # both parser and encoder recurse: shown as sent
        return arguments


def argument_changes(old: str, new: str) -> list[Change]:
    """What differs between two argument texts, key by key when both are JSON objects."""
    before, after = _loads(old), _loads(new)
    if not (isinstance(before, dict) and isinstance(after, dict)):
        if before == after:
            return []
        return [Change(where="arguments", old=_show(before), new=_show(after))]
    missing = object()
    changes = []
    for key in [*before, *(k for k in after if k not in before)]:
        was, now = before.get(key, missing), after.get(key, missing)
        if was != now:
            changes.append(
                Change(
                    where=str(key),
                    old="(none)" if was is missing else _show(was),
                    new="(none)" if now is missing else _show(now),
                )
            )
    return changes


EDIT_NOTE_START = "Note: before approving, "
EDIT_NOTE_END = "Its output follows.\n"
"""How an edit's note starts and ends, before the tool's own output."""


def edit_note(tool: str, original: str, edit: ArgumentEdit) -> str:
    """What the model reads before the tool's output: a person changed its call, and how."""
    who = edit.user_name or edit.user_id
    if edit.user_name:
        who = f"{edit.user_name} ({edit.user_id})"
    changed = argument_changes(original, edit.arguments)
    changes = "; ".join(f"{c.where}: {c.old} -> {c.new}" for c in changed)
    return (
        f"{EDIT_NOTE_START}{who} edited the arguments of this {tool} call "
        f"({changes or 'no visible change'}). The tool ran with {edit.arguments.strip()}, not "
        f"with the arguments you sent. {EDIT_NOTE_END}"
    )


def _loads(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def _reason(error: ValueError) -> str:
    message = getattr(error, "msg", None)
    return str(message) if message else "it cannot be read"
