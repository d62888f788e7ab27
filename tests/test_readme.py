"""The README stays true: its two set-up commands are the ones that exist, and it names every
setting."""

from __future__ import annotations

import re
from pathlib import Path

from bot.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_the_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.DOTALL)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block[1].splitlines()]
    assert commands == ["python3 scripts/dev.py demo", "python3 scripts/dev.py test"]
    assert "python3 scripts/dev.py test" in (ROOT / ".ci" / "run").read_text()


def test_every_setting_is_documented() -> None:
    aliases = {str(field.validation_alias) for field in Settings.model_fields.values()}
    assert {alias for alias in aliases if f"`{alias}`" not in README} == set()


def test_the_screenshot_it_shows_is_committed() -> None:
    for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", README):
        assert (ROOT / image).is_file(), image
