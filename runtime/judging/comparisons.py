"""Comparisons in a `when` that refuse to compare values of different types.

CEL's `==`, `!=` and `in` are heterogeneous: `"true" == true` is simply false. Under a rule such
as `when = "args.force == true"` with `auto = "reject"`, a model that sends `{"force": "true"}`
to a tool that converts nothing (an MCP tool, a hand-written `FunctionTool`) would quietly escape
the rule. So every `==`, `!=` and `in` of an expression is rewritten, once when the policy loads,
into a call of a function that compares the two sides only when they are of one kind (numbers
with numbers, strings with strings; `null` with anything) and otherwise raises: the expression
then cannot be judged for that call (`runtime.policy`), which never makes the call easier.

    strict_source("args.force == true && args.region in ['eu', 'us']")
    == "strict_equals(args.force, true) && strict_in(args.region, ['eu', 'us'])"

The rewriting needs the expression's structure, which the `cel` package does not expose: a small
parser of CEL's grammar (https://github.com/google/cel-spec/blob/master/doc/langdef.md) finds
each relation and keeps every other character of the source as it was. The functions run where
the expression is evaluated (`runtime.judging.evaluation`), which records why a comparison
refused.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

EQUALS = "strict_equals"
CONTAINS = "strict_in"


class Unparsed(ValueError):
    """An expression this parser cannot read (the `cel` package compiled it, so it is valid
    CEL that this module does not know): its comparisons cannot be made strict."""


class KindMismatch(TypeError):
    """Two values of different kinds were compared; the message names both kinds."""


def strict_source(source: str) -> str:
    """`source` with each `==`, `!=` and `in` a call of `strict_equals` or `strict_in`."""
    parser = _Parser(source, _tokens(source))
    node = parser.expr()
    left = parser.peek()
    if left is not None:
        raise Unparsed(f"unexpected {left.text!r}")
    return node.text


def strict_functions(mismatches: list[str]) -> dict[str, Callable[..., bool]]:
    """The functions a rewritten expression calls; each refusal is appended to `mismatches`
    (in words: "a string with a boolean") before it raises."""

    def strict_equals(left: object, right: object) -> bool:
        _same_kinds(left, right, mismatches)
        return left == right

    def strict_in(value: object, container: object) -> bool:
        if isinstance(container, dict):
            keys = list(container)
        elif isinstance(container, list):
            keys = container
        else:
            mismatches.append(f"{kind_of(value)} with a {kind_of(container)} (`in`)")
            raise KindMismatch(mismatches[-1])
        return any(strict_equals(value, key) for key in keys)

    return {EQUALS: strict_equals, CONTAINS: strict_in}


_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (bool, "boolean"),
    ((int, float), "number"),
    (str, "string"),
    (bytes, "bytes"),
    (list, "list"),
    (dict, "map"),
    (dt.datetime, "timestamp"),
    (dt.timedelta, "duration"),
)


def kind_of(value: object) -> str:
    for types, name in _KINDS:  # bool before int: `True` is an int to Python
        if isinstance(value, types):
            return name
    return "null" if value is None else type(value).__name__


def _same_kinds(left: object, right: object, mismatches: list[str]) -> None:
    """Raise `KindMismatch` where the two values (or their items) differ in kind."""
    if left is None or right is None:
        return  # `x == null` asks whether it is null: a question of any value
    if kind_of(left) != kind_of(right):
        mismatches.append(f"a {kind_of(left)} with a {kind_of(right)}")
        raise KindMismatch(mismatches[-1])
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for a, b in zip(left, right, strict=True):
            _same_kinds(a, b, mismatches)
    elif isinstance(left, dict) and isinstance(right, dict):
        for key in left.keys() & right.keys():
            _same_kinds(left[key], right[key], mismatches)


# --- the grammar ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """`op`, `ident`, `literal`."""
    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class _Node:
    start: int
    end: int
    text: str
    """The node's source, its relations rewritten."""


_STRING = (
    r"[rR]?[bB]?[rR]?(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\""
    r"|'(?:\\.|[^'\\\n])*'|\"(?:\\.|[^\"\\\n])*\")"
)
_NUMBER = r"0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?"
_TOKEN = re.compile(
    rf"(?P<space>\s+|//[^\n]*)|(?P<literal>{_STRING}|{_NUMBER})"
    r"|(?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[<>!+\-*/%?:.,\[\](){}])",
    re.DOTALL,
)
_RELATIONS = ("<", "<=", ">", ">=", "==", "!=", "in")


def _tokens(source: str) -> list[_Token]:
    found = []
    at = 0
    while at < len(source):
        match = _TOKEN.match(source, at)
        if match is None:
            raise Unparsed(f"cannot read {source[at : at + 10]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            text = match.group()
            if kind == "ident" and text in ("true", "false", "null"):
                kind = "literal"
            elif kind == "ident" and text == "in":
                kind = "op"
            found.append(_Token(kind, text, match.start(), match.end()))
        at = match.end()
    return found


class _Parser:
    """Recursive descent over CEL's grammar, one method per level, lowest precedence first."""

    def __init__(self, source: str, tokens: list[_Token]) -> None:
        self.source = source
        self.tokens = tokens
        self.at = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        index = self.at + ahead
        return self.tokens[index] if index < len(self.tokens) else None

    def accept(self, *texts: str) -> _Token | None:
        token = self.peek()
        if token is not None and token.kind == "op" and token.text in texts:
            self.at += 1
            return token
        return None

    def expect(self, text: str) -> _Token:
        token = self.accept(text)
        if token is None:
            raise Unparsed(f"expected {text!r}")
        return token

    def between(self, left: _Node, right: _Node) -> str:
        return self.source[left.end : right.start]

    def joined(self, left: _Node, right: _Node) -> _Node:
        return _Node(left.start, right.end, left.text + self.between(left, right) + right.text)

    def expr(self) -> _Node:
        condition = self.binary(0)
        if self.accept("?") is None:
            return condition
        then = self.binary(0)
        self.expect(":")
        otherwise = self.expr()
        return self.joined(self.joined(condition, then), otherwise)

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        _RELATIONS,
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> _Node:
        if level == len(self._LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while (operator := self.accept(*self._LEVELS[level])) is not None:
            right = self.binary(level + 1)
            if operator.text in ("==", "!="):
                negation = "!" if operator.text == "!=" else ""
                text = f"{negation}{EQUALS}({left.text}, {right.text})"
            elif operator.text == "in":
                text = f"{CONTAINS}({left.text}, {right.text})"
            else:
                text = left.text + self.between(left, right) + right.text
            left = _Node(left.start, right.end, text)
        return left

    def unary(self) -> _Node:
        token = self.peek()
        if token is not None and token.kind == "op" and token.text in ("!", "-"):
            self.at += 1
            operand = self.unary()
            prefix = self.source[token.start : operand.start]
            return _Node(token.start, operand.end, prefix + operand.text)
        return self.member()

    def member(self) -> _Node:
        node = self.primary()
        while True:
            if self.accept(".") is not None:
                name = self.peek()
                if name is None or name.kind != "ident":
                    raise Unparsed("expected a field name after '.'")
                self.at += 1
                node = _Node(node.start, name.end, node.text + self.source[node.end : name.end])
                if self.next_is("("):
                    node = self.arguments(node, "(", ")")
            elif self.next_is("["):
                node = self.arguments(node, "[", "]")
            elif self.next_is("{") and _is_name(node.text):
                node = self.arguments(node, "{", "}", entries=True)  # a message: `Type{f: v}`
            else:
                return node

    def next_is(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.kind == "op" and token.text == text

    def arguments(
        self, head: _Node | None, opening: str, closing: str, *, entries: bool = False
    ) -> _Node:
        """`head` followed by a bracketed, comma-separated list (of `key: value` with `entries`)."""
        start_token = self.expect(opening)
        start = head.start if head is not None else start_token.start
        text = head.text + self.source[head.end : start_token.end] if head else opening
        last_end = start_token.end
        while not self.next_is(closing):
            parts = [self.expr()]
            if entries:
                self.expect(":")
                parts.append(self.expr())
            for part in parts:
                text += self.source[last_end : part.start] + part.text
                last_end = part.end
            if self.accept(",") is None:
                break
        end_token = self.expect(closing)
        text += self.source[last_end : end_token.end]
        return _Node(start, end_token.end, text)

    def primary(self) -> _Node:
        token = self.peek()
        if token is None:
            raise Unparsed("the expression ends too soon")
        if token.kind == "literal":
            self.at += 1
            return _Node(token.start, token.end, token.text)
        if token.kind == "ident" or (token.text == "." and self.peek(1) is not None):
            leading = self.accept(".")
            name = self.peek()
            if name is None or name.kind != "ident":
                raise Unparsed("expected a name")
            self.at += 1
            start = leading.start if leading else name.start
            node = _Node(start, name.end, self.source[start : name.end])
            return self.arguments(node, "(", ")") if self.next_is("(") else node
        if token.text == "(":
            self.at += 1
            inner = self.expr()
            closing = self.expect(")")
            opened = self.source[token.start : inner.start]
            return _Node(
                token.start, closing.end, opened + inner.text + self.source[inner.end : closing.end]
            )
        if token.text == "[":
            return self.arguments(None, "[", "]")
        if token.text == "{":
            return self.arguments(None, "{", "}", entries=True)
        raise Unparsed(f"unexpected {token.text!r}")


def _is_name(text: str) -> bool:
    return re.fullmatch(r"\.?[_a-zA-Z][_a-zA-Z0-9]*(?:\.[_a-zA-Z][_a-zA-Z0-9]*)*", text) is not None
