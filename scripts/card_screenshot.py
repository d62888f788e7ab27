"""Draw docs/card.png from the real console: `python -m bot demo`, driven in Chromium.

    .venv/bin/python scripts/card_screenshot.py                 # rewrites docs/card.png
    .venv/bin/python scripts/card_screenshot.py --out card.png  # somewhere else

Starts the demo on a free port with keys of its own (deleted afterwards), types the README's
first task into the console as a person would, and photographs the approval card it gets. Needs
the dev environment (`python3 scripts/dev.py test` once) and Chromium (`/usr/bin/chromium`, or
`CHROMIUM=...`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import redis
from playwright.async_api import async_playwright, expect

from runtime.db.local import free_port

ROOT = Path(__file__).resolve().parent.parent
DOCS_CARD = ROOT / "docs" / "card.png"
TASK = "/agent delete u-100"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
START_SECONDS = 30


async def screenshot_card(console_url: str, out: Path, chromium: str) -> None:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1120, "height": 900})
            await page.goto(f"{console_url}/console")
            await page.fill("#command", TASK)
            await page.press("#command", "Enter")
            approve = page.get_by_role("button", name="Approve", exact=True)
            card = page.locator(".message", has=approve)
            # The demo may start slowly on a busy machine: its first card can take a while.
            await expect(card).to_contain_text("wants to run delete_user", timeout=30_000)
            out.parent.mkdir(parents=True, exist_ok=True)
            await card.screenshot(path=out)
        finally:
            await browser.close()


async def wait_until_up(url: str, demo: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_SECONDS
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if demo.poll() is not None:
                raise SystemExit(f"the demo exited ({demo.returncode}) before it was up")
            try:
                async with session.get(f"{url}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
    raise SystemExit(f"the demo did not answer on {url} within {START_SECONDS} s")


def forget_keys(prefix: str) -> None:
    """The demo's keys, where a Redis that outlives it (`REDIS_URL`) holds them."""
    url = os.environ.get("REDIS_URL")
    if not url:
        return  # the demo's own Redis, in the temporary folder: gone with it
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS_CARD, help="where to write the PNG")
    args = parser.parse_args()
    chromium = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    if not Path(chromium).exists():
        print(f"No Chromium at {chromium}: `sudo apt-get install chromium`, or set CHROMIUM.")
        return 2
    port = free_port()
    prefix = f"countersign-screenshot-{secrets.token_hex(4)}:"
    env = {
        **os.environ,
        "PORT": str(port),
        "REDIS_KEY_PREFIX": prefix,
        "OPENAI_API_KEY": "",  # the scripted model: the same card on every machine
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    with tempfile.TemporaryDirectory() as folder:
        demo = subprocess.Popen(
            [sys.executable, "-m", "bot", "demo"],
            cwd=folder,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            asyncio.run(wait_until_up(url, demo))
            asyncio.run(screenshot_card(url, args.out, chromium))
        finally:
            demo.send_signal(signal.SIGINT)
            demo.wait(timeout=30)
            forget_keys(prefix)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
