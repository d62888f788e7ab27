"""What Slack really sends, as templates to fuzz: every event the bot subscribes to and the
interactions its cards and modals cause, in the shapes of Slack's Events API and interactivity
payloads (as bolt-python's and python-slack-sdk's own test fixtures show them), and the ways to
break each one (`mutated`): a field of the wrong type, missing, huge, deeply nested, or unknown.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from bot.console.local_directory import TEAM

JSON = dict[str, Any]


def envelope(event: JSON) -> JSON:
    """An `event_callback`, as Slack wraps every event."""
    return {
        "token": "verification_token",
        "team_id": TEAM,
        "api_app_id": "A0001",
        "event": {"event_ts": "1700000000.000100", **event},
        "type": "event_callback",
        "event_id": "Ev0001",
        "event_time": 1700000000,
        "authorizations": [
            {
                "enterprise_id": None,
                "team_id": TEAM,
                "user_id": "UBOT0001",
                "is_bot": True,
                "is_enterprise_install": False,
            }
        ],
        "is_ext_shared_channel": False,
        "event_context": "4-eyJldCI6ImFwcF9tZW50aW9uIn0",
    }


EVENTS: tuple[JSON, ...] = (
    {
        "client_msg_id": "9cbd4c5b-7ddf-4ede-b479-ad21fca66d63",
        "type": "app_mention",
        "text": "<@UBOT0001> restart the api",
        "user": "UALICE",
        "ts": "1700000000.000100",
        "team": TEAM,
        "channel": "CGENERAL",
    },
    {
        "type": "message",
        "text": "now delete u-101",
        "user": "UCAROL",
        "ts": "1700000001.000200",
        "thread_ts": "1700000000.000100",
        "parent_user_id": "UBOT0001",
        "team": TEAM,
        "channel": "CGENERAL",
        "channel_type": "channel",
        "blocks": [
            {
                "type": "rich_text",
                "block_id": "b1",
                "elements": [
                    {
                        "type": "rich_text_section",
                        "elements": [{"type": "text", "text": "now delete u-101"}],
                    }
                ],
            }
        ],
    },
    {"type": "message", "subtype": "message_changed", "channel": "CGENERAL", "hidden": True},
    {
        "type": "app_home_opened",
        "user": "UBOB",
        "channel": "DBOB",
        "tab": "home",
        "view": {"id": "VHOMEUBOB", "type": "home", "blocks": [], "hash": "1700000000.home"},
    },
    {
        "type": "subteam_updated",
        "subteam": {
            "id": "S0ONCALL",
            "team_id": TEAM,
            "is_usergroup": True,
            "name": "On call",
            "handle": "oncall",
            "users": ["UBOB", "UCAROL"],
            "user_count": 2,
            "date_update": 1700000000,
        },
    },
    {
        "type": "subteam_members_changed",
        "subteam_id": "S0ONCALL",
        "team_id": TEAM,
        "date_previous_update": 1699999000,
        "date_update": 1700000000,
        "added_users": ["UCAROL"],
        "added_users_count": "1",
        "removed_users": ["UBOB"],
        "removed_users_count": "1",
    },
    {
        "type": "member_joined_channel",
        "user": "UCAROL",
        "channel": "CGENERAL",
        "channel_type": "C",
        "team": TEAM,
        "inviter": "UALICE",
    },
    {"type": "member_left_channel", "user": "UCAROL", "channel": "CGENERAL", "team": TEAM},
    {
        "type": "agent_session_stopped",
        "channel": "CGENERAL",
        "thread_ts": "1700000000.000100",
        "user": "UALICE",
        "streaming_message_ts": "1700000000.000200",
    },
    {"type": "app_uninstalled"},
    {"type": "tokens_revoked", "tokens": {"oauth": ["UALICE"], "bot": ["UBOT0001"]}},
)
"""The events of the app's manifest, one each, as Slack sends them."""

ACTION_IDS = (
    "approve",
    "approve_always",
    "approve_typed",
    "reject",
    "view_arguments",
    "stop_run",
    "approve_with_grant",
    "revoke_grant",
    "edit_arguments",
    "approve_all",
    "reject_all",
)
CALLBACKS = ("reject_reason", "edit_arguments", "confirm_call", "batch_decision", "other")


def block_actions(action_id: str, value: str) -> JSON:
    """A click on a card's button, in Slack's `block_actions` shape (from a channel)."""
    return {
        "type": "block_actions",
        "user": {"id": "UBOB", "username": "bob", "name": "bob", "team_id": TEAM},
        "api_app_id": "A0001",
        "token": "verification_token",
        "container": {
            "type": "message",
            "message_ts": "1700000000.000300",
            "channel_id": "CFUZZ",
            "is_ephemeral": False,
            "thread_ts": "1700000000.000100",
        },
        "trigger_id": "111.222.333",
        "team": {"id": TEAM, "domain": "fuzz"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": "CFUZZ", "name": "fuzz"},
        "message": {"type": "message", "ts": "1700000000.000300", "text": "card", "blocks": []},
        "state": {"values": {}},
        "response_url": "http://127.0.0.1:1/response",
        "actions": [
            {
                "action_id": action_id,
                "block_id": "approval",
                "text": {"type": "plain_text", "text": "Approve", "emoji": True},
                "value": value,
                "style": "primary",
                "type": "button",
                "action_ts": "1700000000.000400",
            }
        ],
    }


def view_submission(callback_id: str, metadata: str) -> JSON:
    """A modal submitted, in Slack's `view_submission` shape."""
    return {
        "type": "view_submission",
        "team": {"id": TEAM, "domain": "fuzz"},
        "user": {"id": "UBOB", "username": "bob", "name": "bob", "team_id": TEAM},
        "api_app_id": "A0001",
        "token": "verification_token",
        "trigger_id": "111.222.333",
        "view": {
            "id": "VFUZZ",
            "team_id": TEAM,
            "type": "modal",
            "blocks": [],
            "private_metadata": metadata,
            "callback_id": callback_id,
            "state": {
                "values": {
                    "reason": {"reason_input": {"type": "plain_text_input", "value": "no"}},
                    "arguments": {
                        "arguments_input": {"type": "plain_text_input", "value": '{"a": 1}'}
                    },
                    "confirm": {"confirm_input": {"type": "plain_text_input", "value": "u-1"}},
                }
            },
            "hash": "1700000000.abc",
            "title": {"type": "plain_text", "text": "Reject"},
            "root_view_id": "VFUZZ",
            "app_id": "A0001",
            "bot_id": "B0001",
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


# --- breaking them -----------------------------------------------------------------------------


def nested(depth: int) -> Any:
    """A JSON value `depth` levels deep (lists and objects in turn)."""
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


hostile_values: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.sampled_from(["", "null", "<!channel>", "U" * 300, "\u202e\u0000\ud7ff", "{}", "[]"]),
    st.integers(min_value=10_000, max_value=300_000).map(lambda n: "x" * n),
    st.integers(min_value=2, max_value=60).map(nested),
    st.lists(st.text(max_size=5), max_size=5),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4),
)
"""Values of every JSON type, huge strings, and nesting deep but within a parser's limits."""


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (a key of an object, an index of a list)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


def replaced(value: Any, path: tuple[Any, ...], new: Any, *, delete: bool = False) -> Any:
    """A copy of `value` with the place at `path` set to `new` (or removed)."""
    copy = json.loads(json.dumps(value))
    holder = copy
    for part in path[:-1]:
        holder = holder[part]
    if delete:
        del holder[path[-1]]
    else:
        holder[path[-1]] = new
    return copy


@st.composite
def mutated(draw: st.DrawFn, template: Any) -> Any:
    """`template` with one to three of its places broken: a wrong type, a huge or deep value,
    or the place removed; sometimes an unknown field besides."""
    value = template
    for _ in range(draw(st.integers(1, 3))):
        places = paths(value)
        if not places:
            break
        path = draw(st.sampled_from(places))
        delete = draw(st.integers(0, 4)) == 0
        value = replaced(value, path, None if delete else draw(hostile_values), delete=delete)
    if isinstance(value, dict) and draw(st.booleans()):
        value = {**value, draw(st.text(min_size=1, max_size=12)): draw(hostile_values)}
    return value
