"""What binds an MCP call: its digest covers the server; policy rules match the server by name;
stored calls of function tools look exactly as before."""

from __future__ import annotations

import json

import pytest

from runtime.calls.digest import call_digest
from runtime.grants.store import Grant
from runtime.jobs.contracts import Conversation
from runtime.policy import Policy, Rule
from runtime.record.envelope import PendingCall, RunEnvelope, dump_envelope, parse_envelope

# The digest of a function tool's call before MCP servers existed: stored approvals still match.
DELETE_U100 = "9056a44f845f97c35a9635fe94239f6ea1785bc9d53a852b68607e1d5a5f456a"


def test_a_function_tools_digest_is_unchanged() -> None:
    assert call_digest("delete_user", '{"user_id": "u-100"}') == DELETE_U100
    assert call_digest("delete_user", '{ "user_id":"u-100" }') == DELETE_U100


def test_an_mcp_calls_digest_covers_the_server() -> None:
    arguments = '{"table": "orders"}'
    on_staging = call_digest("drop_table", arguments, "db-staging")
    assert on_staging != call_digest("drop_table", arguments, "db-prod")
    assert on_staging != call_digest("drop_table", arguments)
    assert on_staging == call_digest("drop_table", '{"table":"orders"}', "db-staging")


POLICY = Policy(
    rules=(
        Rule.model_validate({"tool": "drop_*", "mcp_server": "db*", "auto": "reject"}),
        Rule.model_validate({"tool": "drop_*", "approvers": ["S0DBA"]}),
    ),
    default_approvers=(),
    default_ttl_seconds=3600,
)


@pytest.mark.parametrize(
    ("tool", "server", "auto", "approvers"),
    [
        ("drop_table", "db", "reject", ()),
        ("drop_table", "db-prod", "reject", ()),
        ("drop_table", "warehouse", None, ("S0DBA",)),
        ("drop_table", None, None, ("S0DBA",)),
        ("list_tables", "db", None, ()),
    ],
    ids=["server", "server-glob", "other-server", "function-tool", "other-tool"],
)
def test_a_rule_with_mcp_server_matches_only_that_servers_tools(
    tool: str, server: str | None, auto: str | None, approvers: tuple[str, ...]
) -> None:
    rule = POLICY.rule_for(tool, "ops", server)
    assert (rule.auto, rule.approvers) == (auto, approvers)


def envelope(call: PendingCall) -> RunEnvelope:
    conversation = Conversation(channel="C1", requester="UALICE")
    return RunEnvelope(
        run_id="r0123456789abcdef",
        root_agent="ops",
        task="t",
        conversation=conversation,
        created_at=1.0,
        calls=(call,),
    )


def test_a_stored_function_call_has_no_mcp_fields_and_an_mcp_call_keeps_them() -> None:
    base = PendingCall(
        approval_id="a0123456789",
        call_id="c1",
        tool="delete_user",
        agent="ops",
        arguments="{}",
        expires_at=2.0,
    )
    stored = json.loads(dump_envelope(envelope(base)))
    assert not {"mcp_server", "description"} & set(stored["calls"][0]), "older webs read it"

    mcp = base.model_copy(update={"tool": "drop_table", "mcp_server": "db", "description": "D"})
    read = parse_envelope("r0123456789abcdef", dump_envelope(envelope(mcp)))
    assert (read.calls[0].mcp_server, read.calls[0].description) == ("db", "D")


def test_a_grant_on_an_mcp_call_covers_only_that_servers_tool() -> None:
    grant = Grant(
        id="g0123456789",
        scope="tool",
        channel="C1",
        agent="ops",
        tool="drop_table",
        mcp_server="db-staging",
        user_id="UBOB",
        at=1.0,
        ends_at=3601.0,
        seconds=3600,
        run_id="r0123456789abcdef",
        approval_id="a0123456789",
    )
    digest = call_digest("drop_table", '{"table": "orders"}', "db-staging")
    same = {"channel": "C1", "agent": "ops", "tool": "drop_table", "digest": digest}
    assert grant.covers(**same, mcp_server="db-staging")
    assert not grant.covers(**same, mcp_server="db-prod")
    assert not grant.covers(**same, mcp_server=None), "nor a function tool of that name"
