"""The README's first command, tried in a real browser: `python -m bot demo` and the console.

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
from playwright.async_api import Browser, Page, async_playwright, expect

from runtime.local_redis import free_port
from tests.processes import Process, wait_until_healthy

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
ROOT = Path(__file__).resolve().parent.parent


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
    await expect(page.get_by_text("Deleted user u-100 (Ada Lovelace).")).to_be_visible()
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
    await expect(
        page.get_by_text("rejected by bob (UBOB). Reason: Not during the sale")
    ).to_be_visible()
    await expect(
        page.get_by_text("@bob rejected restart_service: Not during the sale")
    ).to_be_visible()
    await page.screenshot(path=artifacts / "console-rejected.png")
    await expect(page.get_by_text("Nothing ran: restart_service was rejected")).to_be_visible()
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
