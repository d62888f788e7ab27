"""A call's arguments as the tool will receive them: what the policy, the card, the digest, the
audit trail and the backtest see.

A function tool made with the SDK's `function_tool` validates the model's JSON with its own
pydantic model before its body runs, in pydantic's lax mode: `{"force": "true"}` reaches the
tool as `force=True`, `{"amount_cents": "150000"}` as `150000`. A rule judging the model's
text would read a string where the tool gets a boolean or a number, and let the call escape it.
So before anything judges a call, its arguments are validated here exactly as the SDK will
(`agents.tool` `_prepare_arguments`: `params_pydantic_model(**arguments)`), with the model the
SDK builds from the tool's function (`agents.function_schema`), and:

- when validation changes none of the values the model sent (its arguments were well typed),
  `text` is the model's text, unchanged, so digests of stored approvals and "exact arguments"
  grants still match;
- when it changes some, `text` is the JSON of the values the tool receives (those the model
  set: a default it left out stays out, and a `when` reading it cannot be judged; a key the
  tool does not take stays as sent);
- when they do not validate, `problem` says which field and why; the tool would refuse them.

A model whose validation could run code of the tool's author (its own types, validators,
default factories) is not run before approval, as the SDK itself holds
(`can_prepare_without_user_code`). Such a tool, an MCP tool and a hand-written `FunctionTool`
convert nothing: their arguments are checked against the tool's JSON schema only, `text` is the
model's, and a `when` that compares values of different types cannot be judged
(`runtime.judging.comparisons`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ValidationError

from runtime.calls.digest import ArgumentsTooLarge, check_arguments
from runtime.judging.comparisons import kind_of

PROBLEM_CHARS = 200


@dataclass(frozen=True, kw_only=True, slots=True)
class JudgedArguments:
    text: str
    """The arguments the policy, the card and the digest see (see the module's docstring)."""
    problem: str | None = None
    """Why the tool would refuse them ("`amount_cents`: Input should be a valid integer"), or
    None: they fit its schema (or it has none)."""

    @property
    def valid(self) -> bool:
        return self.problem is None


@dataclass(frozen=True, kw_only=True, slots=True)
class ArgumentSchema:
    """How one tool receives its arguments."""

    model: type[BaseModel] | None = None
    """The pydantic model that converts them as the tool's SDK wrapper will; None: none does."""
    json_schema: dict[str, Any] | None = None
    """The tool's JSON schema, checked when no model converts."""

    @classmethod
    def of_json_schema(cls, schema: dict[str, Any] | None) -> ArgumentSchema:
        return cls(json_schema=schema)

    def judged(self, arguments: str) -> JudgedArguments:
        """`arguments` (the model's JSON text) as the tool would receive them."""
        if self.model is None and self.json_schema is None:
            return JudgedArguments(text=arguments)  # nothing checks them: judged as sent
        try:
            check_arguments(arguments)  # before parsing: the parser recurses
            data = json.loads(arguments) if arguments else {}
        except ArgumentsTooLarge as error:
            return JudgedArguments(text=arguments, problem=str(error).rstrip("."))
        except ValueError:
            return JudgedArguments(text=arguments, problem="they are not JSON")
        if not isinstance(data, dict):
            return JudgedArguments(text=arguments, problem="they are not a JSON object")
        if self.model is not None:
            return _converted(self.model, arguments, data)
        assert self.json_schema is not None
        return JudgedArguments(text=arguments, problem=_schema_problem(self.json_schema, data))


NO_SCHEMA = ArgumentSchema()
"""A tool whose arguments nothing checks (a shell call's description, a custom tool's text)."""


def _converted(model: type[BaseModel], arguments: str, data: dict[str, Any]) -> JudgedArguments:
    try:
        parsed = model(**data)  # exactly as the SDK's `_prepare_arguments` validates them
        values = parsed.model_dump(mode="json", exclude_unset=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = f"`{where}`: {first['msg']}" if where else str(first["msg"])
        return JudgedArguments(text=arguments, problem=problem[:PROBLEM_CHARS])
    except (TypeError, ValueError):
        return JudgedArguments(text=arguments)  # not shown as JSON: judged as sent
    # A key the tool does not take stays as sent (the tool ignores it; the card still shows it).
    received = {key: values.get(key, data[key]) for key in data}
    if all(_same(received[key], data[key]) for key in data):
        return JudgedArguments(text=arguments)
    return JudgedArguments(text=json.dumps(received, ensure_ascii=False))


def _same(converted: object, sent: object) -> bool:
    """Whether validation left a value as it was: the same kind (a boolean is no number) and
    equal, item by item."""
    if kind_of(converted) != kind_of(sent):
        return False
    if isinstance(converted, list) and isinstance(sent, list):
        return len(converted) == len(sent) and all(
            _same(a, b) for a, b in zip(converted, sent, strict=True)
        )
    if isinstance(converted, dict) and isinstance(sent, dict):
        return converted.keys() == sent.keys() and all(_same(converted[k], sent[k]) for k in sent)
    return converted == sent


def _schema_problem(schema: dict[str, Any], data: dict[str, Any]) -> str | None:
    try:
        errors = sorted(
            Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path)
        )
    except SchemaError:
        return None  # a schema that cannot be checked checks nothing; the rules still judge
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(part) for part in first.absolute_path)
    problem = f"`{where}`: {first.message}" if where else first.message
    return problem[:PROBLEM_CHARS]
