"""A signed request's body, read within bounds and checked for Slack's outer shape before Bolt
sees it, over HTTP (`bot.web.app`) and Socket Mode (`bot.web.socket_mode`) alike.

Python's JSON parser recurses: a signed body nested 100,000 deep raised `RecursionError` (not
the `ValueError` a parse is expected to raise) and Slack got a 500, and Bolt's own parsing, its
middleware and our listeners all walk what they are given. So a body longer than
`MAX_BODY_CHARS` or nested (arrays and objects, outside strings) deeper than `MAX_BODY_DEPTH`
is refused before anything parses it, and the parsed body must have the outer shape Slack gives
each kind of request (`malformed`): Bolt assumes that shape (`event.type` exists,
`view.callback_id` exists, `user` is an object with an id or an id) and answers anything else
with a 500 and a traceback. `RefusedBody` says why, in one line for the log.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

MAX_BODY_CHARS = 1024**2
"""Slack's requests are a few KiB; the web process refuses larger ones (`client_max_size`)."""
MAX_BODY_DEPTH = 64
"""Slack's deepest payloads (a modal's rich text in its state) nest about a dozen levels; the
parser's recursion limit is near a thousand."""

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


class RefusedBody(ValueError):
    """A signed body that is not something Slack sends; the message says why."""


def nesting(text: str) -> int:
    """How deep arrays and objects nest in the JSON `text` (brackets inside strings do not
    count), read without recursing."""
    depth = deepest = 0
    for bracket in _BRACKET.findall(_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def read_json(text: str) -> Any:
    """`text` parsed, once its length and nesting are within bounds; RefusedBody if not."""
    if len(text) > MAX_BODY_CHARS:
        raise RefusedBody(f"{len(text):,} characters, more than {MAX_BODY_CHARS:,}")
    depth = nesting(text)
    if depth > MAX_BODY_DEPTH:
        raise RefusedBody(f"nested {depth} deep, more than {MAX_BODY_DEPTH}")
    try:
        return json.loads(text)
    except ValueError as error:
        raise RefusedBody("not JSON") from error


def read_body(raw: str, content_type: str | None) -> dict[str, Any]:
    """A signed HTTP body as Bolt will read it (JSON, a form with a JSON `payload`, or a plain
    form), checked first; RefusedBody if it is not something Slack sends."""
    if len(raw) > MAX_BODY_CHARS:
        raise RefusedBody(f"{len(raw):,} characters, more than {MAX_BODY_CHARS:,}")
    body: object
    # As Bolt reads it (`slack_bolt.request.internals.parse_body`), the JSON parsed only here.
    if content_type == "application/json" or raw.startswith("{"):
        body = read_json(raw)
    elif "payload" in raw:
        payload = dict(parse_qsl(raw, keep_blank_values=True)).get("payload")
        body = read_json(payload) if payload is not None else {}
    else:
        body = dict(parse_qsl(raw, keep_blank_values=True))
    reason = malformed(body)
    if reason is not None or not isinstance(body, dict):
        raise RefusedBody(reason or "not an object")
    return body


# --- the outer shape ---------------------------------------------------------------------------


class _Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Identified(_Loose):
    id: str


_Party = _Identified | str | None


class _ResponseUrl(_Loose):
    response_url: str


class _Common(_Loose):
    user: _Party = None
    team: _Party = None
    channel: _Party = None
    enterprise: _Party = None
    authorizations: list[_Loose] | None = None
    # Bolt reads the first while building its request, and fails on a second (it logs through a
    # logger its context does not hold yet); no modal of ours asks for one.
    response_urls: list[_ResponseUrl] = Field(default_factory=list, max_length=1)


class _EventBody(_Loose):
    type: str
    channel: _Party = None
    user: _Party = None
    message: _Loose | None = None
    previous_message: _Loose | None = None
    item: _Loose | None = None


class _EventCallback(_Common):
    type: Literal["event_callback"]
    event: _EventBody


class _ViewBody(_Loose):
    type: str
    callback_id: str
    private_metadata: str = ""
    state: _Loose | None = None


class _ViewPayload(_Common):
    type: Literal["view_submission", "view_closed"]
    view: _ViewBody


class _ActionBody(_Loose):
    action_id: str
    type: str | None = None


class _BlockActionsPayload(_Common):
    type: Literal["block_actions"]
    actions: list[_ActionBody] = Field(min_length=1)
    container: _Loose | None = None


class _OtherTyped(_Common):
    type: Literal["url_verification", "ssl_check", "shortcut", "message_action"]


class _SlashCommandBody(_Common):
    command: str
    text: str = ""


_SHAPE: TypeAdapter[Any] = TypeAdapter(
    Annotated[
        _EventCallback | _ViewPayload | _BlockActionsPayload | _OtherTyped,
        Field(discriminator="type"),
    ]
)


def malformed(body: object) -> str | None:
    """Why a (signed) request body is not something Slack sends, or None if it looks right."""
    if not isinstance(body, dict):
        return "not an object"
    try:
        if "type" in body:
            _SHAPE.validate_python(body)
        else:
            _SlashCommandBody.model_validate(body)
    except ValidationError as error:
        first = error.errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return None
