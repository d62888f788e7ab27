"""Approval cards within Block Kit's limits, with nothing in them that could ping or break out."""

from __future__ import annotations

import dataclasses
import itertools
import json
from typing import Any

import pytest
from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.blocks.cards import (
    approval_decided_blocks,
    approval_request_blocks,
    arguments_modal,
    reject_modal,
)
from bot.blocks.code import SECTION_TEXT_LIMIT, code_block
from runtime.jobs.contracts import Conversation
from runtime.record.envelope import Approval, Decision, PendingCall
from runtime.reporter import RunView
from tests.support.fake_openai import ModelRequest, message, tool_call
from tests.support.harness import Harness

RUN = RunView(
    run_id="r0123456789abcdef",
    agent="ops",
    task="t",
    conversation=Conversation(channel="C1", requester="UALICE", thread="1.1"),
)


def call(arguments: str, **changes: object) -> PendingCall:
    base = PendingCall(
        approval_id="a0123456789",
        call_id="call_1",
        tool="delete_user",
        agent="ops",
        arguments=arguments,
        expires_at=1_800_000_000.0,
    )
    return base.model_copy(update=changes)


def sent(blocks: list[Block]) -> list[dict[str, Any]]:
    """What the Slack clients send for a builder's blocks: each model's `to_dict()`."""
    return [block.to_dict() for block in blocks]


def sent_view(view: View) -> dict[str, Any]:
    return view.to_dict()


def texts(blocks: list[dict[str, object]]) -> list[str]:
    found: list[str] = []
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            found.append(str(text["text"]))
        for element in block.get("elements", []) + block.get("fields", []):  # type: ignore[operator]
            if isinstance(element, dict) and isinstance(element.get("text"), str):
                found.append(element["text"])
    return found


def test_a_card_shows_agent_tool_pretty_arguments_requester_and_expiry() -> None:
    blocks = sent(approval_request_blocks(RUN, call('{"user_id":"u-100","hard":true}')))
    shown = "\n".join(texts(blocks))
    assert "*ops* wants to run `delete_user`" in shown
    assert '"user_id": "u-100",\n  "hard": true' in shown
    assert "<@UALICE>" in shown
    assert "<!date^1800000000^" in shown
    [actions] = [b for b in blocks if b["type"] == "actions"]
    buttons = actions["elements"]
    assert [b["text"]["text"] for b in buttons] == [
        "Approve",
        "Approve with a note…",
        "Approve always",
        "Reject",
        "Answer instead",
    ]
    assert {b["value"] for b in buttons} == {"r0123456789abcdef:a0123456789"}


def test_a_quorum_card_says_who_approved_and_who_still_may() -> None:
    """ "1 more needed: @bob" read as if only bob could approve, when bob had approved."""
    approved = Approval(user_id="UALICE", outcome="approved", at=1.0)
    quorum = call("{}", quorum=2, approvers=("UALICE", "UBOB", "UCAROL"))
    asked_by_dave = RUN.conversation.model_copy(update={"requester": "UDAVE"})
    requested_by_dave = dataclasses.replace(RUN, conversation=asked_by_dave)
    approvers = ["UALICE", "UBOB", "UCAROL"]
    for counted, line in (
        ((), "0 of 2 approvals: <@UALICE>, <@UBOB> or <@UCAROL> can approve"),
        ((approved,), "1 of 2 approvals: <@UALICE> approved; <@UBOB> or <@UCAROL> can approve"),
    ):
        card = quorum.model_copy(update={"approvals": counted})
        shown = "\n".join(texts(sent(approval_request_blocks(requested_by_dave, card, approvers))))
        assert f":busts_in_silhouette: {line}" in shown
    anyone = call("{}", quorum=2, approvals=(approved,))
    shown = "\n".join(texts(sent(approval_request_blocks(RUN, anyone))))
    assert "1 of 2 approvals: <@UALICE> approved; anyone else in the channel can approve" in shown


def test_who_may_decide_mentions_people_and_groups_and_the_requesters_withdrawal() -> None:
    """Names in plain text were not drawn as people by Slack, and the requester, left out,
    could still reject."""
    gate = call("{}", approvers=("UALICE", "UBOB", "S0OPS"))
    shown = "\n".join(texts(sent(approval_request_blocks(RUN, gate, ["UBOB", "S0OPS"]))))
    assert (
        "*Who may decide*\n<@UBOB>, <!subteam^S0OPS>\n<@UALICE> (who asked) may only withdraw it"
        in shown
    )


def test_a_requesters_rejection_of_their_own_call_is_a_withdrawal() -> None:
    decision = Decision(outcome="rejected", user_id="UALICE", reason="wrong user", decided_at=1.0)
    blocks = sent(approval_decided_blocks(RUN, call("{}", decision=decision)))
    assert texts(blocks)[0] == (
        ":leftwards_arrow_with_hook: Withdrawn by <@UALICE>, who asked for `delete_user`: "
        "wrong user"
    )
    assert "rejected" not in texts(blocks)[0]


def test_every_time_in_slack_is_written_one_way() -> None:
    """Slack's date token in the reader's zone, one style; where Slack cannot draw it, ISO 8601."""
    from bot.words import audit as audit_words
    from bot.words import choices as choice_words
    from runtime.audit.trail import AuditEntry

    one_way = "<!date^1800000000^{date_short_pretty} at {time}|2027-01-15T08:00+00:00>"
    entry = AuditEntry(id="1-0", event="granted", run_id="r1", at=1_800_000_000.0, details={})
    written = [
        "\n".join(texts(sent(approval_request_blocks(RUN, call("{}"))))),
        choice_words.grant_used_line("delete_user", "UBOB", 1_800_000_000.0),
        choice_words.granted_line("delete_user", "tool", "C1", 1_800_000_000.0, "UBOB"),
        choice_words.grant_listing("delete_user", "ops", "tool", "UBOB", 1_800_000_000.0, 1),
    ]
    for text in written:
        assert one_way in text, text
        assert text.count("<!date^") == 1
    to_the_second = "<!date^1800000000^{date_short_pretty} at {time_secs}|2027-01-15T08:00:00"
    assert audit_words.audit_line(entry).startswith(to_the_second), "events seconds apart"


def test_an_audit_line_says_each_event_and_reason_in_words() -> None:
    from bot.words import audit as audit_words
    from runtime.audit import AuditEvent
    from runtime.audit.trail import AuditEntry

    assert set(audit_words.AUDIT_EVENT_WORDS) == {str(event) for event in AuditEvent}
    for event in AuditEvent:
        entry = AuditEntry(id="1-0", event=event, run_id="r1", at=1.0, details={"tool": "t"})
        words = audit_words.audit_line(entry).split("> ", 1)[1].split(" run `")[0]
        assert "_" not in words, event
    refused = AuditEntry(
        id="1-0",
        event="denied",
        run_id="r1",
        at=1.0,
        details={"tool": "delete_user", "user_id": "UBOB", "reason": "self_approval"},
    )
    assert "*click refused* `delete_user` by <@UBOB> (their own request)" in (
        audit_words.audit_line(refused)
    )


def test_a_digest_reads_the_same_on_the_card_the_batch_modal_and_the_audit() -> None:
    """A person holding a card beside `/agent audit` sees one string, not `sha256:` and 16
    digits here and 12 bare digits there; the **Approve all** modal, which binds what it shows,
    shows the whole digest in the same notation."""
    from bot.words import audit as audit_words
    from bot.words import batch as batch_words
    from runtime.audit.trail import AuditEntry
    from runtime.calls import call_digest

    digest = call_digest("delete_user", '{"user_id": "u-100"}')
    shown = f"`sha256:{digest[:16]}`"
    entry = AuditEntry(
        id="1-0", event="approved", run_id="r1", at=1_800_000_000.0, details={"digest": digest}
    )
    written = {
        "card": "\n".join(texts(sent(approval_request_blocks(RUN, call("{}", digest=digest))))),
        "audit": audit_words.audit_line(entry),
    }
    for where, text in written.items():
        assert shown in text, where
        assert text.count(digest[:12]) == 1, where
    # Approve all binds each call to what its modal shows, so it shows the whole digest, in the
    # same notation.
    header = batch_words.call_header("delete_user", digest)
    assert f"`sha256:{digest}`" in header
    assert header.count(digest[:12]) == 1


def test_the_reject_modal_names_the_requester_as_the_card_does() -> None:
    modal = sent_view(reject_modal(call("{}"), "m", "UALICE"))
    assert texts(modal["blocks"])[0] == (
        "Rejecting `delete_user`, requested by <@UALICE> for *ops*."
    )
    shown = "\n".join(texts(sent(approval_request_blocks(RUN, call("{}")))))
    assert "*Requested by*\n<@UALICE>" in shown


def test_arguments_cannot_ping_or_close_the_code_block() -> None:
    hostile = json.dumps({"note": "<!channel> <@U1> & ``` *bold*"})
    blocks = sent(approval_request_blocks(RUN, call(hostile)))
    code = next(t for t in texts(blocks) if t.startswith("```"))
    assert "<!channel>" not in code and "<@U1>" not in code
    assert "&lt;!channel&gt; &lt;@U1&gt; &amp;" in code
    assert code.count("```") == 2, "only the fences themselves"


@pytest.mark.parametrize("fence", ["```", "````", "`````", "``````", "`" * 9, "``x```"])
def test_no_run_of_backticks_closes_the_code_block_early(fence: str) -> None:
    arguments = json.dumps({"command": f"echo {fence}<!here> *bold*{fence}"})
    card_code = next(
        t for t in texts(sent(approval_request_blocks(RUN, call(arguments)))) if t.startswith("```")
    )
    [modal_code] = texts(sent_view(arguments_modal(call(arguments)))["blocks"])
    pretty = json.dumps(json.loads(arguments), indent=2)
    for code in (card_code, modal_code):
        inner = code.removeprefix("```\n").removesuffix("\n```")
        assert "```" not in inner, "only the fences themselves"
        assert "<!here>" not in code
        shown = inner.replace("\u200b", "").replace("&lt;", "<").replace("&gt;", ">")
        assert shown == pretty, "only zero-width spaces were added"


def test_huge_arguments_are_shortened_and_fully_viewable_in_a_modal() -> None:
    arguments = json.dumps({"rows": [f"row-{n}-<&>" for n in range(3000)]})
    blocks = sent(approval_request_blocks(RUN, call(arguments)))
    assert all(len(t) <= SECTION_TEXT_LIMIT for t in texts(blocks))
    assert any("Arguments shortened" in t for t in texts(blocks))
    assert "view_arguments" in [
        e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]
    ]
    assert len(json.dumps(blocks)) < 16_000

    modal = sent_view(arguments_modal(call(arguments)))
    assert len(modal["blocks"]) <= 100
    assert all(len(t) <= SECTION_TEXT_LIMIT for t in texts(modal["blocks"]))
    # Split at line breaks: each block ends a line, and together they are every line.
    joined = "\n".join(
        t.removeprefix("```\n").removesuffix("\n```") for t in texts(modal["blocks"])
    )
    assert joined.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") == (
        json.dumps(json.loads(arguments), indent=2)
    )


def test_view_full_arguments_splits_a_long_value_between_words() -> None:
    """A long sentence was cut mid-word from one block to the next."""
    note = " ".join(f"word{n}" for n in range(3000))
    modal = sent_view(arguments_modal(call(json.dumps({"note": note}))))
    inner = [t.removeprefix("```\n").removesuffix("\n```") for t in texts(modal["blocks"])]
    assert len(inner) > 3
    for block, following in itertools.pairwise(inner):
        assert block.endswith(" ") and following.startswith("word"), (block[-9:], following[:9])
    assert "".join(inner) == json.dumps({"note": note}, indent=2)


def test_code_block_counts_source_characters_not_escapes() -> None:
    text, shown = code_block("<" * 5000)
    assert len(text) <= SECTION_TEXT_LIMIT
    assert shown == text.count("&lt;")


def test_arguments_that_are_not_json_are_shown_as_sent() -> None:
    blocks = sent(approval_request_blocks(RUN, call("not json {")))
    assert any("not json {" in t for t in texts(blocks))


@pytest.mark.parametrize(
    ("decision", "first_line"),
    [
        (
            Decision(outcome="approved", user_id="UBOB", reason=None, decided_at=1_800_000_100.0),
            ":white_check_mark: <@UBOB> approved `delete_user`",
        ),
        (
            Decision(
                outcome="approved_always", user_id="UBOB", reason=None, decided_at=1_800_000_100.0
            ),
            ":white_check_mark: <@UBOB> approved `delete_user` for the rest of this run",
        ),
        (
            Decision(
                outcome="approved",
                user_id="UDAVE",
                reason=None,
                decided_at=1_800_000_100.0,
                approvals=(
                    Approval(user_id="UCAROL", outcome="approved", at=1_800_000_000.0),
                    Approval(user_id="UDAVE", outcome="approved", at=1_800_000_100.0),
                ),
            ),
            ":white_check_mark: <@UCAROL> and <@UDAVE> approved `delete_user`",
        ),
        (
            Decision(
                outcome="rejected",
                user_id="UCAROL",
                reason="<script> no",
                decided_at=1_800_000_100.0,
            ),
            ":x: <@UCAROL> rejected `delete_user`: &lt;script&gt; no",
        ),
        (
            Decision(outcome="expired", reason=None, decided_at=1_800_000_100.0),
            ":hourglass: Expired, did not run",
        ),
        (
            Decision(outcome="stopped", user_id="UALICE", reason=None, decided_at=1_800_000_100.0),
            ":no_entry: Stopped by <@UALICE>",
        ),
    ],
    ids=["approved", "approved-always", "quorum", "rejected", "expired", "stopped"],
)
def test_a_decided_card_reads_as_decided_with_no_buttons_and_no_expiry(
    decision: Decision, first_line: str
) -> None:
    blocks = sent(approval_decided_blocks(RUN, call('{"user_id": "u-100"}', decision=decision)))
    shown = texts(blocks)
    assert shown[0] == first_line
    assert shown[1].startswith("Requested by <@UALICE> for *ops* · ")
    assert "<!date^1800000100^" in shown[1], "when it was settled"
    assert '"user_id": "u-100"' in shown[2], "what was asked stays readable"
    assert not [b for b in blocks if b["type"] == "actions"]
    assert "Expires" not in json.dumps(blocks)
    assert "<!date^1800000000^" not in json.dumps(blocks), "no deadline shown"
    assert "wants to run" not in json.dumps(blocks), "it no longer wants anything"


def test_a_decided_card_with_shortened_arguments_keeps_only_the_view_button() -> None:
    decision = Decision(outcome="approved", user_id="UBOB", reason=None, decided_at=1.0)
    arguments = json.dumps({"rows": [f"row-{n}" for n in range(3000)]})
    blocks = sent(approval_decided_blocks(RUN, call(arguments, decision=decision)))
    assert [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]] == [
        "view_arguments"
    ]


async def test_view_full_arguments_opens_a_modal_with_everything(bot: Harness) -> None:
    rows = [f"row-{n}" for n in range(800)]

    def script(request: ModelRequest) -> list[dict[str, object]]:
        if not request.tool_outputs:
            return [tool_call("delete_user", {"user_id": "u-1", "rows": rows}, "c1")]
        return [message("ok")]

    bot.model.script = script
    root = await bot.start_run("big")
    [card] = await bot.cards(root, 1)
    assert "view_arguments" in card.action_ids()
    await bot.sender.click(card, "view_arguments", user="UBOB")
    [view] = await bot.slack.wait_for(lambda: bot.slack.views, what="modal")
    assert view["title"]["text"] == "Tool call arguments"
    assert "row-799" in json.dumps(view)
    assert card.action_ids() == [
        "approve",
        "approve_note",
        "approve_always",
        "reject",
        "answer",
        "view_arguments",
    ]


def test_a_decided_card_of_an_mcp_tool_still_names_its_server() -> None:
    decision = Decision(outcome="approved", user_id="UBOB", reason=None, decided_at=1.0)
    blocks = sent(approval_decided_blocks(RUN, call("{}", decision=decision, mcp_server="db")))
    assert texts(blocks)[1].startswith("Requested by <@UALICE> for *ops* on MCP server `db` · ")


def test_an_mcp_tools_description_leaves_its_docstrings_argument_list_out() -> None:
    """The card quoted "Args: table: The table to drop, e.g. orders." after the summary."""
    listed = (
        "Drop a table and every row in it. This cannot be undone.\n\n"
        "    Args:\n        table: The table to drop, e.g. orders.\n"
    )
    shown = "\n".join(texts(sent(approval_request_blocks(RUN, call("{}", description=listed)))))
    assert "_Tool description:_ Drop a table and every row in it. This cannot be undone." in shown
    assert "Args" not in shown and "e.g. orders" not in shown


def test_a_call_without_arguments_says_so_and_offers_no_edit() -> None:
    """`get_user_name` showed `{}` with an **Edit** button."""
    none = call("{}", allow_edit=True, params_schema={"type": "object", "properties": {}})
    blocks = sent(approval_request_blocks(RUN, none))
    [arguments] = [b for b in blocks if b.get("block_id") == "call_arguments"]
    assert arguments["text"]["text"] == "_No arguments._"
    assert "accessory" not in arguments, "nothing to edit"
    assert "{}" not in json.dumps(blocks)
    assert "view_arguments" not in json.dumps(blocks)
    some = call(
        '{"user_id": "u-1"}', allow_edit=True, params_schema={"properties": {"user_id": {}}}
    )
    [arguments] = [
        b for b in sent(approval_request_blocks(RUN, some)) if b.get("block_id") == "call_arguments"
    ]
    assert arguments["accessory"]["action_id"] == "edit_arguments"
