"""The README's tour, walked as a newcomer walks it: what each step shows reads true, and what a
person reads is named and consistent (the console over HTTP, as its page drives it)."""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import sys

from tests.bot.console.test_console import Console, console
from tests.support.processes import ROOT

__all__ = ["console"]
"""The console fixture of `tests.bot.console.test_console`, used here too."""


async def command_line(console: Console, *args: str) -> tuple[int, str, str]:
    """`python -m runtime ...` in a terminal beside the demo, on its Redis and key prefix."""
    environ = {
        "PATH": "/usr/bin:/bin",
        "REDIS_URL": console.redis_url,
        "REDIS_KEY_PREFIX": console.settings.redis_key_prefix,
        "APPROVERS": "UALICE,UBOB,UCAROL",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "runtime",
        *args,
        cwd=ROOT,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    return process.returncode or 0, out.decode(), err.decode()


async def approved_by_bob(console: Console, task: str) -> None:
    await console.intent("UALICE", kind="command", command="/agent", text=task)
    [card] = await console.wait_for(console.cards, "a card")
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(console.answers, "the answer")


async def test_the_command_line_names_the_demos_people_and_channel(console: Console) -> None:
    """`runtime stats` printed `Channel CDEMO` and `UBOB 1`."""
    await approved_by_bob(console, "delete u-100")
    yesterday = (dt.datetime.now(dt.UTC) - dt.timedelta(days=1)).date().isoformat()
    code, out, err = await command_line(console, "stats", "--since", yesterday)
    assert code == 0, err
    assert out.startswith("Channel #demo:"), out
    assert "  decided most: @bob 1" in out.splitlines()


async def test_step_3_as_bob_approve_all_says_why_before_the_modal_and_reject_withdraws(
    console: Console,
) -> None:
    """Acting as bob, who asked: **Approve all** opened the whole modal and only after it was
    submitted said "You may not decide …"; his Reject of his own call read "Rejected"."""
    text = "delete u-101 and restart search"
    await console.intent("UBOB", kind="command", command="/agent", text=text)
    cards = await console.wait_for(lambda: c if len(c := console.cards()) == 2 else None, "cards")
    assert all(
        "*Who may decide*\\n<@UALICE>, <@UCAROL>\\n<@UBOB> (who asked) may only withdraw it"
        in card.all_text()
        for card in cards
    )
    [status] = await console.wait_for(  # its stream stopped with them, the buttons at its foot
        lambda: [m for m in console.slack.messages.values() if "approve_all" in m.action_ids()],
        "Approve all",
    )
    code, _ = await console.intent(
        "UBOB", kind="click", message_ts=status.ts, action_id="approve_all"
    )
    assert code == 200
    [note] = await console.wait_for(
        lambda: [
            n
            for n in console.slack.private_notes
            if n.user == "UBOB" and "asked for these" in n.text
        ],
        "why, before any modal",
    )
    assert note.text.startswith("You asked for these, so someone else has to approve them")
    assert [v for v in console.slack.opened.values() if v.open] == []

    await console.intent("UBOB", kind="click", message_ts=cards[0].ts, action_id="reject")
    [modal] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the reject modal"
    )
    await console.intent(
        "UBOB", kind="submit", view_id=modal.id, values={"reason": {"reason_input": "wrong user"}}
    )
    await console.wait_for(lambda: "Withdrawn by <@UBOB>" in cards[0].all_text(), "withdrawn")
    assert "rejected" not in cards[0].all_text()


async def status_text(console: Console, user: str = "UALICE") -> str:
    before = len(console.slack.private_notes)
    await console.intent(user, kind="command", command="/agent", text="status")
    [note] = await console.wait_for(
        lambda: [n for n in console.slack.private_notes[before:] if "runs" in n.text], "status"
    )
    return str(note.text)


async def test_a_refund_the_preview_says_would_be_refused_is_refused(console: Console) -> None:
    """The preview said the provider "would refuse" 1500.00 of a 48.00 order, then the thread
    said "Refunded 1500.00". Meanwhile `/agent status` counts approvals, not calls: the call
    needs two."""
    await console.intent("UALICE", kind="command", command="/agent", text="refund o-5521 150000")
    [card] = await console.wait_for(console.cards, "a card")
    assert (
        "Would not refund: 1500.00 is more than the 48.00 paid on order o-5521, so the payment "
        "provider would refuse it." in card.all_text()
    )
    assert "· waiting for 2 approvals ·" in await status_text(console)
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(lambda: "1 of 2 approvals" in card.all_text(), "bob's approval")
    assert "· waiting for 1 approval ·" in await status_text(console)
    await console.intent("UCAROL", kind="click", message_ts=card.ts, action_id="approve")
    [answer] = await console.wait_for(console.answers, "the answer")
    assert "Not refunded: 1500.00 is more than the 48.00 paid on order o-5521" in answer
    assert "Refunded" not in answer


async def test_a_refund_within_what_is_paid_is_previewed_from_what_is_left(
    console: Console,
) -> None:
    for amount, previewed in (
        ("3000", "Would refund 30.00 of 48.00 to Grace Hopper's Visa ending 4242"),
        ("3000", "Would not refund: 30.00 is more than the 18.00 paid on order o-5521"),
    ):
        await console.intent(
            "UALICE", kind="command", command="/agent", text=f"refund o-5521 {amount}"
        )
        [card] = await console.wait_for(console.cards, "a card")
        assert previewed in card.all_text()
        done = len(console.answers())
        await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
        await console.wait_for(lambda n=done: len(console.answers()) > n, "the answer")
    answers = console.answers()
    assert "Refunded 30.00 on order o-5521" in answers[0]
    assert "Not refunded: 30.00 is more than the 18.00 paid" in answers[-1]


async def test_a_copy_in_a_direct_message_says_how_it_ended_once_decided(console: Console) -> None:
    """Carol's copy kept inviting her to decide ("a decision here counts there too") after bob
    had approved in #demo."""
    await console.intent("UALICE", kind="command", command="/agent", text="refund o-5521 1200")
    [card] = await console.wait_for(console.cards, "a card")
    [copy] = await console.wait_for(lambda: console.cards("DUCAROL"), "carol's copy")
    assert "a decision here counts there too" in copy.all_text()
    await console.intent("UBOB", kind="click", message_ts=card.ts, action_id="approve")
    await console.wait_for(lambda: not copy.actions(), "the copy, decided")
    assert "a decision here counts there too" not in copy.all_text()
    assert "A copy of a request in <#CDEMO>" in copy.all_text()
    assert "approved by <@UBOB>." in copy.all_text()


def readme_task(pattern: str) -> str:
    """A task as the README's tour writes it."""
    found = re.search(pattern, (ROOT / "README.md").read_text())
    assert found, pattern
    return found[1]


async def test_the_tours_deletions_in_order_each_find_their_user(console: Console) -> None:
    """Step 9 asked to delete u-101, which step 3 had already deleted: its card previewed
    "There is no user u-101"."""
    await approved_by_bob(console, readme_task(r"type `/agent (delete u-\d+)`"))
    step_3 = readme_task(r"`/agent (delete u-\d+ and restart search)` asks twice")
    await console.intent("UALICE", kind="command", command="/agent", text=step_3)
    await console.wait_for(lambda: len(console.cards()) == 2, "step 3's cards")
    [status] = await console.wait_for(  # its stream stopped with them, the buttons at its foot
        lambda: [m for m in console.slack.messages.values() if "approve_all" in m.action_ids()],
        "Approve all",
    )
    await console.intent("UBOB", kind="click", message_ts=status.ts, action_id="approve_all")
    [modal] = await console.wait_for(
        lambda: [v for v in console.slack.opened.values() if v.open], "the modal"
    )
    await console.intent("UBOB", kind="submit", view_id=modal.id, values={})
    await console.wait_for(lambda: len(console.answers()) == 2, "step 3's answer")

    step_9 = readme_task(r"type `(now delete u-\d+)` in the \*\*Reply…\*\* box")
    root = next(m for m in console.slack.messages.values() if m.thread_ts is None)
    await console.intent("UCAROL", kind="reply", thread_ts=root.ts, text=step_9)
    [card] = await console.wait_for(console.cards, "step 9's card")
    assert "Would permanently delete" in card.all_text(), card.all_text()
    assert "There is no user" not in card.all_text()
