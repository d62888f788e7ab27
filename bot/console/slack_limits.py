"""What real Slack would refuse, judged by Slack's own SDK before the stand-in Slack accepts it.

Nothing Countersign sends is tried against real Slack in the tests or the console. The bot
builds every card, message, modal and Home tab as `slack_sdk` models (`bot.blocks`), and the
client that sends one validates it as it writes it (`to_dict()` runs `validate_json()` on every
nested object: lengths, counts, styles): past those limits, what the bot builds fails in the
process that sends it and never arrives. What arrives is judged again, as JSON, by the same
models (`Block.parse`, `View`), which also catches what building cannot: a key or a value a
model would drop or read differently (`_same`), and Block Kit written by hand as dicts. A few
documented limits the models do not check are checked here only: 50 blocks a message, 40,000
characters of text, 2,000 characters a field.

`refusal()` answers with Slack's error code (`invalid_blocks`, `msg_too_long`) and why.
`plain_text_marks()` is our own rule, not Slack's: Slack shows Markdown in a `plain_text` object
(a button, an option, a placeholder, a modal's title) as typed, backticks and all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block, SectionBlock
from slack_sdk.models.views import View

MESSAGE_BLOCK_LIMIT = 50
TEXT_LIMIT = 40_000
"""`text` of a message; longer is `msg_too_long`."""
FIELD_TEXT_LIMIT = 2_000
"""Each of a section's `fields` (the SDK checks only how many)."""
VIEW_METHODS = frozenset({"views.open", "views.update", "views.push", "views.publish"})
MESSAGE_METHODS = frozenset(
    {"chat.postMessage", "chat.update", "chat.postEphemeral", "chat.stopStream", "response"}
)


@dataclass(frozen=True, slots=True)
class Refusal:
    method: str
    error: str
    """Slack's error code, as the API would answer it."""
    detail: str
    """What is wrong, for the test or the console's log."""


def refusal(method: str, args: dict[str, Any]) -> Refusal | None:
    """Why real Slack would refuse this call, or None when it would take it."""
    try:
        if method in VIEW_METHODS:
            _check_view(args.get("view"))
        elif method in MESSAGE_METHODS:
            text = args.get("text")
            if isinstance(text, str) and len(text) > TEXT_LIMIT:
                return Refusal(method, "msg_too_long", f"text is {len(text):,} characters")
            _check_blocks(_loaded(args.get("blocks")) or [], MESSAGE_BLOCK_LIMIT)
    except _Invalid as error:
        return Refusal(method, "invalid_blocks", str(error))
    return None


# A backtick anywhere; `*`, `_` or `~` opening or closing a word (`restart_service` is a name).
_MARKS = re.compile(r"`|(?:^|[\s(])[*_~]\S|\S[*_~](?:$|[\s).,:;!?])")


def plain_text_marks(method: str, args: dict[str, Any]) -> Refusal | None:
    """A `plain_text` object of this call that holds Markdown marks, if one does."""
    if method in VIEW_METHODS:
        sent = _loaded_or_none(args.get("view"))
    elif method in MESSAGE_METHODS:
        sent = _loaded_or_none(args.get("blocks"))
    else:
        return None
    for where, text in _plain_texts(sent, "view" if method in VIEW_METHODS else "blocks"):
        if _MARKS.search(text):
            return Refusal(method, "markdown_in_plain_text", f"{where}: {text[:120]!r}")
    return None


def _loaded_or_none(value: Any) -> Any:
    try:
        return _loaded(value)
    except _Invalid:
        return None


def _plain_texts(value: Any, path: str) -> list[tuple[str, str]]:
    if isinstance(value, list):
        return [
            found for i, item in enumerate(value) for found in _plain_texts(item, f"{path}[{i}]")
        ]
    if not isinstance(value, dict):
        return []
    found = []
    if value.get("type") == "plain_text" and isinstance(value.get("text"), str):
        found.append((path, value["text"]))
    for key, item in value.items():
        found += _plain_texts(item, f"{path}.{key}")
    return found


class _Invalid(Exception):
    pass


def _loaded(value: Any) -> Any:
    """Form-encoded calls carry JSON as a string."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as error:
            raise _Invalid(f"not JSON: {value[:80]!r}") from error
    return value


def _check_view(raw: Any) -> None:
    view = _loaded(raw)
    if not isinstance(view, dict):
        raise _Invalid("view must be an object")
    try:
        parsed = View(**view).to_dict()
    except (SlackObjectFormationError, TypeError, ValueError, AttributeError) as error:
        raise _Invalid(f"view: {error}") from error
    _same("view", view, parsed)
    _check_blocks(view.get("blocks") or [], limit=None)


def _check_blocks(blocks: Any, limit: int | None) -> None:
    if not isinstance(blocks, list):
        raise _Invalid("blocks must be an array")
    if limit is not None and len(blocks) > limit:
        raise _Invalid(f"{len(blocks)} blocks; a message holds at most {limit}")
    for index, block in enumerate(blocks):
        where = f"blocks[{index}]"
        if not isinstance(block, dict):
            raise _Invalid(f"{where} must be an object")
        try:
            parsed = Block.parse(block)
            if parsed is None:
                raise _Invalid(f"{where}: unknown block type {block.get('type')!r}")
            as_sent = parsed.to_dict()
        except (SlackObjectFormationError, TypeError, ValueError, AttributeError) as error:
            raise _Invalid(f"{where} ({block.get('type')}): {error}") from error
        _same(where, block, as_sent)
        if isinstance(parsed, SectionBlock):
            for field in parsed.fields or []:
                text = getattr(field, "text", "")
                if len(text) > FIELD_TEXT_LIMIT:
                    raise _Invalid(f"{where}: a field of {len(text):,} characters (max 2,000)")


def _same(where: str, sent: Any, parsed: Any) -> None:
    """The SDK drops what it does not know and coerces what it can: both mean Slack would not
    take the block as sent."""
    if sent != parsed:
        raise _Invalid(f"{where} is not valid Block Kit as sent: {_difference(sent, parsed)}")


def _difference(sent: Any, parsed: Any, path: str = "") -> str:
    if isinstance(sent, dict) and isinstance(parsed, dict):
        for key in sent.keys() | parsed.keys():
            if key not in parsed:
                return f"{path}.{key} is not a field Slack knows"
            if key not in sent:
                return f"{path}.{key} would be added"
            if sent[key] != parsed[key]:
                return _difference(sent[key], parsed[key], f"{path}.{key}")
    if isinstance(sent, list) and isinstance(parsed, list) and len(sent) == len(parsed):
        for index, (a, b) in enumerate(zip(sent, parsed, strict=True)):
            if a != b:
                return _difference(a, b, f"{path}[{index}]")
    return f"{path or 'value'} {json.dumps(sent)[:120]} is read as {json.dumps(parsed)[:120]}"
