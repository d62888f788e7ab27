"""The digest that binds an approval to exactly the call that was shown.

SHA-256 of the canonical JSON of the tool name and its arguments (parsed, so that whitespace
and key order do not matter; kept as a string when the model sent something that is not JSON).
A call of a tool from an MCP server also covers the server's name, so an approval of
`drop_table` on `db-staging` does not cover `drop_table` on `db-prod`; a function tool's
digest has no server key and is unchanged.

A shell, local shell or apply_patch call has no arguments of the model's: `arguments` is then
its description (`runtime.calls.description`), and the digest also covers its `kind`, so that
two different commands never share a digest. Calls of other tools have no kind key: their
digests are byte for byte what they were before kinds existed, as stored approvals and grants
expect.

Shown to people one way everywhere (the card, the Home tab, the batch modal, `/agent audit`, the
docs): `shown_digest`.

Arguments longer than `MAX_ARGUMENT_CHARS` or nested deeper than `MAX_ARGUMENT_DEPTH` have no
digest: `ArgumentsTooLarge` says which bound they pass. Python's JSON parser recurses, and a
1,400-deep array would end in a `RecursionError` (which is not a `ValueError`) instead.
"""

from __future__ import annotations

import hashlib
import json
import re

SHOWN_HEX_DIGITS = 16
MAX_ARGUMENT_CHARS = 1_000_000
MAX_ARGUMENT_DEPTH = 64
"""Far beyond any tool's schema, far below the parser's recursion limit."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class ArgumentsTooLarge(ValueError):
    """Arguments too long or too deeply nested to digest; the message says which, and the
    bound, in words a person editing them can act on."""


def check_arguments(arguments: str) -> None:
    """Raise `ArgumentsTooLarge` if `arguments` pass `MAX_ARGUMENT_CHARS` or nest (arrays
    and objects, outside strings) deeper than `MAX_ARGUMENT_DEPTH`."""
    if len(arguments) > MAX_ARGUMENT_CHARS:
        raise ArgumentsTooLarge(
            f"The arguments are {len(arguments):,} characters long; "
            f"at most {MAX_ARGUMENT_CHARS:,} are accepted."
        )
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", arguments)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    if deepest > MAX_ARGUMENT_DEPTH:
        raise ArgumentsTooLarge(
            f"The arguments nest {deepest} levels deep; at most {MAX_ARGUMENT_DEPTH} are accepted."
        )


def call_digest(
    tool: str, arguments: str, server: str | None = None, *, kind: str | None = None
) -> str:
    """Raises `ArgumentsTooLarge` for arguments past the bounds (`check_arguments`)."""
    check_arguments(arguments)
    try:
        parsed: object = json.loads(arguments) if arguments else {}
    except ValueError:
        parsed = arguments
    content: dict[str, object] = {"tool": tool, "arguments": parsed}
    if server is not None:
        content["mcp_server"] = server
    if kind is not None:
        content["kind"] = kind
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def shown_digest(digest: str) -> str:
    """A digest as people read it: `sha256:` and its first `SHOWN_HEX_DIGITS` hex digits.

    One form wherever a digest is shown, so that a person can hold a card beside the audit
    trail and see the same string. The algorithm's name says what to recompute (the docs say
    how); the digits are the start of the full digest that exports and `--json` carry, so a
    search for them finds the call there. Sixteen digits (64 bits) tell apart any calls a person
    compares; the binding itself always uses the whole digest.
    """
    return f"sha256:{digest[:SHOWN_HEX_DIGITS]}"
