"""A rule's `when` read against the argument schema of each tool it can match, for
`python -m runtime policy check`: what would make it fail at run time, said before.

At run time a `when` that names an argument the tool does not have, or compares one with a
value of another type, cannot be evaluated (`runtime.conditions`): the rule then holds
undecided and loosens nothing, and the person who wrote `args.forc == true` never learns why
`auto = "approve"` did nothing. So, for each tool of the registry the rule can match:

- each field of `args` it names must be one of the tool's arguments (nested ones too) where the
  schema lists them all (`additionalProperties: false`, as the SDK's strict tools do); else
  "did you mean `force`?", from the names it has;
- each comparison of an argument with a literal (`args.name > 3`) must compare like with like;
- and the expression, evaluated by the `cel` package on arguments made from the schema (one
  value of each argument's type), must not fail on its operand types (`args.name + 1`).

The `cel` package compiles and evaluates an expression and names the variables it reads
(`Program.variables`) but not their fields, so the fields and comparisons are read from the
expression's tokens with Python's tokenizer, whose names, dots, strings and numbers are CEL's.
"""

from __future__ import annotations

import ast
import difflib
import io
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import cel

Schema = Mapping[str, Any]
COMPARE = frozenset({"==", "!=", "<", "<=", ">", ">="})
_LEFT = frozenset({"", "(", "&", "|", ",", "[", "?", ":"})
"""What may stand before an operand of a comparison (`!` binds tighter: `!args.a == b`)."""
_RIGHT = frozenset({"", ")", "&", "|", ",", "]", "?", ":"})
_WORDS = {"string": "a string", "number": "a number", "boolean": "true or false"}
_WORDS |= {"array": "a list", "object": "an object", "null": "null", "bytes": "bytes"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: int
    text: str
    start: int
    end: int
    """Where it is in the expression (offsets)."""


@dataclass(frozen=True, slots=True)
class Comparison:
    path: tuple[str, ...]
    """The field of `args` compared."""
    operator: str
    literal_type: str
    """What it is compared with: `string`, `number`, `boolean`, `null` or `bytes`."""
    text: str
    """As written, e.g. `args.name > 3`."""


def when_problems(when: str, schemas: Mapping[str, Schema]) -> list[str]:
    """What in `when` fails on the arguments of each tool it can meet (tool name -> JSON
    schema), one sentence each; a field several tools lack is said once for all of them."""
    tokens = _tokens(when)
    lacking: dict[tuple[tuple[str, ...], int], list[tuple[str, str]]] = {}
    said: list[str] = []
    for tool, schema in schemas.items():
        unknown = [_unknown(path, schema) for path in dict.fromkeys(_paths(tokens))]
        for found in unknown:
            if isinstance(found, _Missing):
                lacking.setdefault((found.path, found.depth), []).append((tool, found.hint))
            elif found is not None:
                said.append(f"{found} (in `{tool}`)")
        if not any(unknown):  # else the rest would only fail on the same fields again
            said += _type_problems(when, tokens, tool, schema)
    for (path, depth), tools in lacking.items():
        field = f"`args.{_dotted(path)}`"
        inside = f"`{_dotted(path[:depth])}` of " if depth else ""
        if len(tools) == 1:
            [(tool, hint)] = tools
            said.append(f"{field}: {inside}`{tool}` has no argument `{path[depth]}`; {hint}")
        else:
            names = ", ".join(f"`{tool}`" for tool, _ in tools)
            said.append(f"{field}: {inside}{names} have no argument `{path[depth]}`.")
    return list(dict.fromkeys(said))


def _type_problems(when: str, tokens: list[_Token], tool: str, schema: Schema) -> list[str]:
    problems = []
    for compared in _comparisons(when, tokens):
        kinds = _types(_at(schema, schema, compared.path))
        if kinds and compared.literal_type not in kinds | {"null"}:
            outcome = (
                "so they are never equal"
                if compared.operator in ("==", "!=")
                else "so the rule cannot be evaluated"
            )
            problems.append(
                f"`{compared.text}` compares `args.{_dotted(compared.path)}`, "
                f"{_type_words(kinds)} in `{tool}`, with {_WORDS[compared.literal_type]}: "
                f"CEL does not convert between them, {outcome}."
            )
    if not problems:
        failed = _evaluation_error(when, tool, schema)
        if failed is not None:
            problems.append(failed)
    return problems


def _evaluation_error(when: str, tool: str, schema: Schema) -> str | None:
    """The evaluator's complaint about the operand types, on a value of each argument's type."""
    program = cel.compile(when)
    if "args" not in program.variables():
        return None
    variables = {"args": _sample(schema, schema), "tool": tool, "agent": "a"}
    variables |= {"mcp_server": None, "channel": "C0", "requester": "U0"}
    try:
        program.execute(variables)
    except TypeError as error:
        fields = ", ".join(
            f"`args.{_dotted(path)}` {_type_words(_types(_at(schema, schema, path)))}"
            for path in dict.fromkeys(_paths(_tokens(when)))
        )
        reason = str(error).split(". ")[0].rstrip(".")
        return f"it cannot be evaluated on `{tool}`'s arguments ({fields}): {reason}."
    except (KeyError, RuntimeError, ValueError, OverflowError):
        return None  # a value this sample lacks (`int("x")`): not a type fault
    return None


@dataclass(frozen=True, slots=True)
class _Missing:
    path: tuple[str, ...]
    depth: int
    """`path[depth]` is not among the arguments of the object at `path[:depth]`."""
    hint: str
    """"did you mean `force`?", or the names there are."""


def _unknown(path: tuple[str, ...], schema: Schema) -> _Missing | str | None:
    """What is wrong with reading `args.<path>` on this schema, if anything."""
    node: Schema = schema
    for depth, name in enumerate(path):
        node = _resolved(schema, node)
        properties = node.get("properties")
        if not isinstance(properties, Mapping) or node.get("additionalProperties") is not False:
            kinds = _types(node)
            if kinds and "object" not in kinds:
                return (
                    f"`args.{_dotted(path)}`: `{_dotted(path[:depth])}` is "
                    f"{_type_words(kinds)}, which has no fields"
                )
            return None  # any name may be there
        if name not in properties:
            known = sorted(str(key) for key in properties)
            close = difflib.get_close_matches(name, known, n=1)
            return _Missing(path, depth, f"did you mean `{close[0]}`?" if close else _listed(known))
        node = properties[name]
    return None


def _listed(known: list[str]) -> str:
    return "its arguments: " + ", ".join(f"`{k}`" for k in known) + "." if known else "it has none."


def _comparisons(source: str, tokens: list[_Token]) -> Iterator[Comparison]:
    """Each `args.<field> <op> <literal>` (or the other way round) that is a whole operand:
    nothing binds tighter on either side (`args.a + 1 > 2`, `3 > args.n.size()` are not)."""
    for start, end, path in _path_spans(tokens):
        if _text_at(tokens, end) in COMPARE:
            kind, stop = _literal(tokens, end + 1)
            if kind and _text_at(tokens, start - 1) in _LEFT and _text_at(tokens, stop) in _RIGHT:
                operator = tokens[end].text
                yield Comparison(path, operator, kind, _written(source, tokens[start:stop]))
        elif _text_at(tokens, start - 1) in COMPARE and _text_at(tokens, end) in _RIGHT:
            for first in (start - 3, start - 2):  # `-1 < args.n` or `1 < args.n`
                kind, stop = _literal(tokens, first)
                if kind and stop == start - 1 and _text_at(tokens, first - 1) in _LEFT:
                    operator = tokens[start - 1].text
                    yield Comparison(path, operator, kind, _written(source, tokens[first:end]))
                    break


def _literal(tokens: list[_Token], at: int) -> tuple[str | None, int]:
    """The type of the literal starting at `at` (None: not one), and where it ends."""
    if at < 0 or at >= len(tokens):
        return None, at
    first = tokens[at]
    if first.text == "-":
        number = at + 1 < len(tokens) and tokens[at + 1].kind == tokenize.NUMBER
        return ("number", at + 2) if number else (None, at)
    if first.kind == tokenize.NUMBER:
        return "number", at + 1
    if first.kind == tokenize.STRING:
        bytes_ = first.text.lstrip("rR").startswith(("b", "B"))
        return ("bytes" if bytes_ else "string"), at + 1
    return {"true": "boolean", "false": "boolean", "null": "null"}.get(first.text), at + 1


def _text_at(tokens: list[_Token], at: int) -> str:
    return tokens[at].text if 0 <= at < len(tokens) else ""


def _written(source: str, tokens: list[_Token]) -> str:
    """`source` from the first of `tokens` to the last, as written."""
    return source[tokens[0].start : tokens[-1].end]


def _paths(tokens: list[_Token]) -> list[tuple[str, ...]]:
    return [path for _, _, path in _path_spans(tokens)]


def _path_spans(tokens: list[_Token]) -> Iterator[tuple[int, int, tuple[str, ...]]]:
    """Each `args.a.b` / `args["a"]` (start, end, fields), fields called as methods left out."""
    for start, token in enumerate(tokens):
        if token.text != "args" or _text_at(tokens, start - 1) == ".":
            continue
        at, path = start + 1, []
        while at + 1 < len(tokens):
            one, two = tokens[at], tokens[at + 1]
            if one.text == "." and two.kind == tokenize.NAME and _text_at(tokens, at + 2) != "(":
                path.append(two.text)
                at += 2
            elif (
                one.text == "[" and two.kind == tokenize.STRING and _text_at(tokens, at + 2) == "]"
            ):
                path.append(str(ast.literal_eval(two.text)))
                at += 3
            else:
                break
        if path:
            yield start, at, tuple(path)


def _tokens(source: str) -> list[_Token]:
    found = []
    lines = source.splitlines(keepends=True)
    offsets = [sum(len(line) for line in lines[:n]) for n in range(len(lines) + 1)]
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
                continue
            if token.type == tokenize.ERRORTOKEN and not token.string.strip():
                continue
            start = offsets[token.start[0] - 1] + token.start[1]
            end = offsets[token.end[0] - 1] + token.end[1]
            found.append(_Token(token.type, token.string, start, end))
    except (tokenize.TokenError, SyntaxError):
        pass  # compiled by CEL already: what was read so far is checked
    return found


def _resolved(root: Schema, node: Schema) -> Schema:
    """`node`, through a `$ref` into the root's `$defs`, and past `anyOf` with null."""
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"))
        return _resolved(root, found) if isinstance(found, Mapping) else {}
    for key in ("anyOf", "oneOf"):
        options = [o for o in node.get(key) or () if isinstance(o, Mapping)]
        real = [o for o in options if o.get("type") != "null"]
        if len(real) == 1:
            return _resolved(root, real[0])
    return node


def _at(root: Schema, node: Schema, path: tuple[str, ...]) -> Schema:
    for name in path:
        properties = _resolved(root, node).get("properties")
        found = properties.get(name) if isinstance(properties, Mapping) else None
        if not isinstance(found, Mapping):
            return {}
        node = found
    return _resolved(root, node)


def _types(node: Schema) -> frozenset[str]:
    kind = node.get("type")
    kinds = {kind} if isinstance(kind, str) else set(kind if isinstance(kind, list) else ())
    if "enum" in node and not kinds:
        kinds = {_json_type(value) for value in node["enum"]}
    return frozenset("number" if k == "integer" else k for k in kinds) - {"null"}


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else "null" if value is None else "object"


def _type_words(kinds: frozenset[str]) -> str:
    return " or ".join(_WORDS.get(kind, kind) for kind in sorted(kinds)) or "of any type"


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


def _sample(root: Schema, node: Schema) -> Any:
    """One value of the schema's type: what each argument is made of, not what it holds."""
    node = _resolved(root, node)
    if "const" in node:
        return node["const"]
    if node.get("enum"):
        return node["enum"][0]
    kinds = _types(node)
    if "object" in kinds or "properties" in node:
        properties = node.get("properties") or {}
        return {name: _sample(root, sub) for name, sub in properties.items()}
    if "array" in kinds:
        items = node.get("items")
        return [_sample(root, items)] if isinstance(items, Mapping) else []
    samples = {"string": "x", "number": 1, "boolean": True}
    return next((samples[k] for k in sorted(kinds) if k in samples), None)
