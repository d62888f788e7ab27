"""Installing the project: `scripts/dev.py` runs `pip install -e .` on every change of
pyproject.toml, so what that prints is what a newcomer reads each time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_editable_install_says_nothing_of_folders_that_may_shadow_the_packages(
    tmp_path: Path,
) -> None:
    # --ignore-installed: into `tmp_path` only, leaving the installation the tests run from.
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--ignore-installed"]
    installed = subprocess.run(
        [*pip, "-e", str(ROOT), "--prefix", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    said = installed.stdout + installed.stderr
    assert installed.returncode == 0, said
    assert "Editable installation" not in said, said
    assert "Please be careful with folders" not in said, said
    [pth] = tmp_path.rglob("__editable__*.pth")
    assert pth.read_text().strip() == str(ROOT), "the checkout itself, on sys.path"
