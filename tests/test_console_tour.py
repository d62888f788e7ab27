"""The README's tour, walked as a newcomer walks it: what each step shows reads true, and what a
person reads is named and consistent (the console over HTTP, as its page drives it)."""

from __future__ import annotations

import asyncio
import datetime as dt
import sys

from tests.processes import ROOT
from tests.test_console import Console, console

__all__ = ["console"]
"""The console fixture of `tests.test_console`, used here too."""


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
    [status] = [m for m in console.slack.messages.values() if "approve_all" in m.action_ids()]
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
