"""The README's console steps, tried in a real browser: `python -m bot demo` and the console.

Each flow is what the issues' "Done when" asks of a newcomer: approve and reject, stop a run,
decide from the Home tab, grant for an hour and revoke, edit before approving.

Playwright drives Debian's Chromium (/usr/bin/chromium; `scripts/dev.py test` installs it when
it runs as root). Without Chromium the test is skipped on a developer's machine and fails in CI
(`CI` set), so CI can never pass without having run it.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Locator, Page, async_playwright, expect

from runtime.db.local import free_port
from tests.support.processes import Process, wait_until_healthy

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[3]


def chromium_or_explain() -> str:
    if shutil.which(CHROMIUM):
        return CHROMIUM
    reason = (
        f"no Chromium at {CHROMIUM}: `apt-get install chromium` (scripts/dev.py test does it "
        "when run as root), or set CHROMIUM to a Chromium binary"
    )
    if os.environ.get("CI"):
        pytest.fail(f"CI must run the browser test, but there is {reason}")
    pytest.skip(reason)


@pytest.fixture
async def demo(redis_url: str, prefix: str, tmp_path: Path) -> AsyncIterator[str]:
    """`python -m bot demo` as a person starts it, on a free port and the tests' Redis."""
    port = free_port()
    env = {
        "PORT": str(port),
        "REDIS_URL": redis_url,
        "REDIS_KEY_PREFIX": prefix,
        "OPENAI_API_KEY": "",  # the scripted model, whatever the machine has set
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    process = Process("demo", "python -m bot demo", env, tmp_path)
    try:
        await wait_until_healthy(f"http://127.0.0.1:{port}/healthz", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.signal(signal.SIGINT)
        code = await process.wait(timeout=30)
        assert code == 0, process.log()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    executable = chromium_or_explain()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def type_command(page: Page, text: str) -> None:
    await page.fill("#command", text)
    await page.press("#command", "Enter")


async def open_console(
    browser: Browser, demo: str, width: int = 1200, height: int = 900
) -> tuple[Page, list[str]]:
    """The console's page, acting as alice; the list collects the page's script errors."""
    page = await browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(f"{demo}/console")
    await expect(page.locator("#model")).to_contain_text("Scripted model")
    await page.select_option("#person", "UALICE")
    return page, errors


async def new_card(page: Page, tool: str) -> Locator:
    """The open card for `tool`, found once and then followed by its message, whatever it
    comes to say."""
    approve = page.get_by_role("button", name="Approve", exact=True)
    found = page.locator("#messages .message", has=approve).filter(has_text=tool).last
    await expect(found).to_contain_text(f"wants to run {tool}")
    ts = await found.get_attribute("data-ts")
    return page.locator(f'#messages .message[data-ts="{ts}"]')


async def ask_to_restart(page: Page) -> Locator:
    """The card of `/agent restart the api`, asked by whoever the console acts as."""
    await type_command(page, "/agent restart the api")
    return await new_card(page, "restart_service")


def answer(page: Page, text: str) -> Locator:
    """Where the model's `text` is told last: its words stream in the stretch's message as they
    are written, then the answer is posted whole below."""
    return page.get_by_text(text).last


async def restarted(page: Page, count: int) -> None:
    """The demo's restart tool ran: its `count`th restart of the api is told in the thread."""
    await expect(answer(page, f"Restarted api (restart #{count}).")).to_be_visible()


def sidebar(page: Page) -> Locator:
    return page.get_by_role("navigation", name="Workspace")


async def test_approve_and_reject_with_a_reason_in_the_console(
    browser: Browser, demo: str, artifacts: Path
) -> None:
    page = await browser.new_page(viewport={"width": 1100, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    await page.goto(f"{demo}/console")
    await expect(page.locator("#model")).to_contain_text("Scripted model")

    await type_command(page, "/agent delete u-100")
    card = page.locator(".message", has=page.get_by_role("button", name="Approve", exact=True))
    await expect(card).to_contain_text("ops wants to run delete_user")
    await expect(card).to_contain_text('"user_id": "u-100"')
    await expect(page.get_by_text("Only visible to you")).to_be_visible()
    await card.screenshot(path=artifacts / "console-card.png")

    await page.select_option("#person", "UBOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await expect(answer(page, "Deleted user u-100 (Ada Lovelace).")).to_be_visible()
    await expect(page.get_by_text("@bob approved delete_user")).to_be_visible()
    await page.screenshot(path=artifacts / "console-approved.png")

    await page.select_option("#person", "UALICE")  # people may not decide their own requests
    await type_command(page, "/agent restart the api")
    card = page.locator(".message", has=page.get_by_role("button", name="Reject", exact=True))
    await page.select_option("#person", "UBOB")
    await card.get_by_role("button", name="Reject", exact=True).click()
    modal = page.get_by_role("dialog", name="Reject tool call")
    await modal.get_by_role("button", name="Reject").click()
    await expect(modal).to_contain_text("Please say why")
    await modal.get_by_label("Why? The agent reads this.").fill("Not during the sale")
    await page.screenshot(path=artifacts / "console-reject-modal.png")
    await modal.get_by_role("button", name="Reject").click()
    await expect(modal).to_be_hidden()
    await expect(answer(page, "rejected by bob. Reason: Not during the sale")).to_be_visible()
    await expect(
        page.get_by_text("@bob rejected restart_service: Not during the sale")
    ).to_be_visible()
    await page.screenshot(path=artifacts / "console-rejected.png")
    await expect(page.get_by_text("Nothing ran: restart_service was rejected")).to_be_visible()
    # Today's times read "Today at …", as Slack draws them, not the date and year each time;
    # the audit's, a few seconds apart, to the second.
    rejected = page.locator("#messages .message", has_text="@bob rejected restart_service")
    await expect(rejected).to_contain_text("decided Today at")
    await type_command(page, "/agent audit")
    audit = page.locator("#messages .message", has_text="Audit: the last hour")
    await expect(audit).to_contain_text(re.compile(r"Today at \d{1,2}:\d{2}:\d{2}"))
    shortcodes = re.findall(r":[a-z][a-z0-9_+-]*:", await page.locator("#messages").inner_text())
    assert shortcodes == [], "every emoji is drawn"

    too_long = "/agent " + "x" * 4001
    await type_command(page, too_long)
    await expect(page.locator("#composer-error")).to_contain_text("1 character too long")
    assert await page.input_value("#command") == too_long, "what was typed stays"
    await page.fill("#command", "/agent " + "x" * 4000)
    await expect(page.locator("#composer-error")).to_be_empty()
    assert errors == []


async def test_the_card_screenshot_script_draws_the_card(tmp_path: Path, redis_url: str) -> None:
    chromium = chromium_or_explain()
    out = tmp_path / "card.png"
    script = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "scripts" / "card_screenshot.py"),
        "--out",
        str(out),
        env={**os.environ, "CHROMIUM": chromium, "REDIS_URL": redis_url},
    )
    assert await asyncio.wait_for(script.wait(), timeout=120) == 0
    assert out.read_bytes().startswith(b"\x89PNG"), "docs/card.png is drawn this way"


async def test_stop_a_waiting_run_from_the_console(browser: Browser, demo: str) -> None:
    page, errors = await open_console(browser, demo)
    card = await ask_to_restart(page)
    # The status message's Stop (Slack's own, on the session, shows while it is processing).
    await page.locator("button.btn", has_text="Stop").click()
    await expect(card).to_contain_text("⛔ Stopped by @alice")
    await expect(card.get_by_role("button")).to_have_count(0)
    await expect(page.get_by_text("⛔ Stopped by @alice. Nothing more runs")).to_be_visible()

    # Nothing ran: the next restart, approved, is the api's first.
    card = await ask_to_restart(page)
    await page.select_option("#person", "UBOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await restarted(page, 1)
    assert errors == []


async def test_decide_from_the_home_tab_and_the_card_agrees(
    browser: Browser, demo: str, artifacts: Path
) -> None:
    page, errors = await open_console(browser, demo)
    card = await ask_to_restart(page)

    await page.select_option("#person", "UBOB")
    await sidebar(page).get_by_role("button", name="Home").click()
    home = page.get_by_role("region", name="Home tab")
    await expect(home).to_contain_text("Waiting for you")
    await expect(home).to_contain_text("ops wants to run restart_service")
    await expect(home).to_contain_text("Asked by @alice in #demo")
    await page.screenshot(path=artifacts / "console-home.png")
    await home.get_by_role("button", name="Approve", exact=True).click()
    await expect(home).to_contain_text("Nothing waits for you", timeout=15_000)

    await sidebar(page).get_by_role("button", name="# demo").click()
    await expect(card).to_contain_text("✅ @bob approved restart_service")
    await expect(card.get_by_role("button")).to_have_count(0)
    await restarted(page, 1)

    # Alice's tab lists her live runs with Stop; the link opens the run's thread.
    await page.select_option("#person", "UALICE")
    await type_command(page, "/agent delete u-101")
    await new_card(page, "delete_user")
    await sidebar(page).get_by_role("button", name="Home").click()
    await expect(home).to_contain_text("Your runs")
    await expect(home.get_by_role("button", name="Stop", exact=True)).to_have_count(1)
    await home.get_by_role("link", name="thread").click()
    await expect(page.locator("#messages .message.highlight")).to_contain_text("delete u-101")
    assert errors == []


async def test_grant_restart_service_for_an_hour_then_revoke_it(
    browser: Browser, demo: str, artifacts: Path
) -> None:
    page, errors = await open_console(browser, demo)
    card = await ask_to_restart(page)
    await page.select_option("#person", "UBOB")
    menu = card.get_by_role("combobox", name="Approve and allow…")
    hour = menu.locator("option", has_text="restart_service in #demo for 1 hour")
    await menu.select_option(await hour.get_attribute("value"))
    await expect(card).to_contain_text("Also allowed by @bob: restart_service in #demo")
    await restarted(page, 1)

    await page.select_option("#person", "UALICE")
    await type_command(page, "/agent restart the api")
    await restarted(page, 2)
    quiet = page.locator("#messages .message", has_text="approved by @bob's grant (until")
    await expect(quiet).to_have_count(1)
    await expect(page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    await page.screenshot(path=artifacts / "console-grant-used.png")

    await quiet.get_by_role("button", name="Revoke").click()
    revoked = page.get_by_text("Revoked. restart_service in #demo asks a person again")
    await expect(revoked).to_be_visible()
    await ask_to_restart(page)  # it asks again
    assert errors == []


async def test_at_760_px_the_menu_text_reads_and_a_command_is_followed(
    browser: Browser, demo: str, artifacts: Path
) -> None:
    page, errors = await open_console(browser, demo, width=760, height=700)
    await type_command(page, "/agent restart the api")
    card = await new_card(page, "restart_service")
    label = card.locator(".section-text", has_text="Fewer cards")
    box = await label.bounding_box()
    assert box is not None and box["width"] > 200, box  # not one word per line
    await card.screenshot(path=artifacts / "console-card-760.png")

    for task in ("list users", "help", "list users"):
        await type_command(page, f"/agent {task}")
    await page.locator("#messages").evaluate("box => { box.scrollTop = 0; }")
    await type_command(page, "/agent delete u-100")
    latest = await new_card(page, "delete_user")
    await expect(latest).to_be_in_viewport()
    assert errors == []


async def test_edit_a_refund_amount_before_approving_it(
    browser: Browser, demo: str, artifacts: Path
) -> None:
    page, errors = await open_console(browser, demo)
    await type_command(page, "/agent refund o-5521 1200")
    card = await new_card(page, "refund_order")
    await page.select_option("#person", "UBOB")
    await card.get_by_role("button", name="Edit", exact=True).click()
    modal = page.get_by_role("dialog", name="Edit, then approve")
    field = modal.get_by_label("Arguments (JSON)")
    await expect(field).to_have_value(re.compile(r'"amount_cents": 1200'))

    await field.fill('{"order_id": "o-5521", "amount_cents": 900')
    await modal.get_by_role("button", name="Approve edited").click()
    await expect(modal.get_by_role("alert")).to_contain_text("not valid JSON")
    await expect(field).to_have_value('{"order_id": "o-5521", "amount_cents": 900')
    await page.screenshot(path=artifacts / "console-edit-error.png")
    await expect(card.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    await field.fill('{"order_id": "o-5521", "amount_cents": 900}')
    await modal.get_by_role("button", name="Approve edited").click()
    await expect(modal).to_be_hidden()
    await expect(card).to_contain_text("Edited and approved by @bob")
    await expect(card).to_contain_text("amount_cents: 1200 → 900")
    await expect(answer(page, "Refunded 9.00 on order o-5521")).to_be_visible()

    # Carol gets a copy of refund cards in her direct messages (the demo's policy): it agrees.
    await page.select_option("#person", "UCAROL")
    await sidebar(page).locator("#dm-list").get_by_role("button").click()
    copy = page.locator("#messages .message", has_text="refund_order")
    await expect(copy).to_contain_text("Edited and approved by @bob")
    await expect(copy).to_contain_text("A copy of a request in #demo")
    await expect(page.locator("#messages")).not_to_contain_text("asked ops")
    assert errors == []


async def test_a_reply_in_the_thread_continues_the_run_there(browser: Browser, demo: str) -> None:
    page, errors = await open_console(browser, demo)
    card = await ask_to_restart(page)
    await page.select_option("#person", "UBOB")
    await card.get_by_role("button", name="Approve", exact=True).click()
    await restarted(page, 1)

    await page.select_option("#person", "UCAROL")
    box = page.get_by_role("textbox", name="Reply in this thread")
    await box.fill("now delete u-101")
    await box.press("Enter")
    by_carol = page.locator("#messages .message", has=page.locator(".meta", has_text="carol"))
    await expect(by_carol.filter(has_text="now delete u-101")).to_have_count(1)
    second = await new_card(page, "delete_user")
    await expect(second).to_contain_text('"user_id": "u-101"')
    await page.select_option("#person", "UBOB")
    await second.get_by_role("button", name="Approve", exact=True).click()
    await expect(answer(page, "Deleted user u-101")).to_be_visible()
    assert errors == []
