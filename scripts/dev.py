#!/usr/bin/env python3
"""Set up and run Countersign with nothing but Python >= 3.11 installed.

    python3 scripts/dev.py demo     # venv + dependencies, then the local console (no Slack app,
                                    # no OpenAI key, no Redis needed): http://localhost:3000/console
    python3 scripts/dev.py test     # venv + dependencies, then ruff, mypy and the test suite

Both create `.venv/` in the repository and install the project into it (`demo` only what the
demo needs, `test` the dev tools too). `demo` starts a Redis when none answers on localhost,
with its files in `.redis/`. `test` also installs Debian's Chromium for the browser test when
it is missing and this runs as root (as CI does); extra arguments go to pytest.
Standard library only: it must run before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
STAMP = VENV / ".installed"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
BROWSER_PACKAGES = ("chromium", "fonts-noto-color-emoji")
PARALLEL = ["-n", "3", "--dist", "loadfile"]


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


NONE = 5
"""pytest's exit code when the arguments chose no test."""


def run(*command: str | Path, env: dict[str, str] | None = None, allow: int = 0) -> int:
    """Run `command`; exit with its code unless it succeeded (or exited with `allow`)."""
    result = subprocess.run([str(part) for part in command], cwd=ROOT, check=False, env=env)
    if result.returncode not in (0, allow):
        sys.exit(result.returncode)
    return result.returncode


def ensure_environment(extras: tuple[str, ...]) -> None:
    """Create the venv and install the project with `extras`, unless already done for this
    pyproject.toml."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any venv exists
        sys.exit(f"Countersign needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    if not PYTHON.exists():
        say(f"creating {VENV.relative_to(ROOT)}")
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    try:
        installed = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        installed = {}
    if installed.get("pyproject") == digest and set(extras) <= set(installed.get("extras", [])):
        return
    say(f"installing Countersign with [{','.join(extras)}] into {VENV.relative_to(ROOT)}")
    run(PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip")
    run(PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{','.join(extras)}]")
    STAMP.write_text(json.dumps({"pyproject": digest, "extras": sorted(extras)}))


def ensure_chromium() -> None:
    """Debian's Chromium for the browser test; installed with apt-get when this runs as root.

    Without it the browser test is skipped on a developer's machine and fails in CI.
    """
    if CHROMIUM.exists():
        return
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        say(f"no Chromium at {CHROMIUM}: `sudo apt-get install chromium` to run the browser test")
        return
    say(f"installing Debian's {' '.join(BROWSER_PACKAGES)} for the browser test")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "-q", *BROWSER_PACKAGES]

    def apt_get(*command: str) -> bool:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, env=env, check=False)
        return done.returncode == 0

    # A fresh machine has no package lists yet: update once, only if the install needs it.
    if not apt_get(*install) and not (apt_get(apt, "update", "-q") and apt_get(*install)):
        say("could not install Chromium; the browser test will say so")


def test(pytest_args: list[str]) -> None:
    ensure_environment(("dev", "demo"))
    ensure_chromium()
    say("ruff")
    run(PYTHON, "-m", "ruff", "check", ".")
    run(PYTHON, "-m", "ruff", "format", "--check", ".")
    say("mypy (strict)")
    run(PYTHON, "-m", "mypy")
    say("pytest")
    # Three pytest workers, a test file each at a time: most of a test's time is spent waiting
    # on real processes (two workers kept two cores 60% busy), so three finish sooner even on
    # two cores: 523 s against 817 s for the same 705 tests. `-n 0` runs serially.
    chosen = any(a.startswith(("-n", "--numprocesses")) for a in pytest_args)
    if chosen or any(a.startswith("-m") for a in pytest_args):
        run(PYTHON, "-m", "pytest", *([] if chosen else PARALLEL), *pytest_args)
        return
    # The chaos tests kill processes and stop Redis against deadlines, which two other test
    # files on the same two cores stretch (two of them failed together in one CI run so), so
    # they run after the rest, one at a time (413 s for 11 of them).
    first = run(PYTHON, "-m", "pytest", *PARALLEL, "-m", "not chaos", *pytest_args, allow=NONE)
    say("pytest: the chaos tests, one at a time")
    then = run(PYTHON, "-m", "pytest", "-n", "0", "-m", "chaos", *pytest_args, allow=NONE)
    if first == then == NONE:
        sys.exit(NONE)  # the arguments chose no test at all


def demo() -> None:
    ensure_environment(("demo",))
    say("starting the demo: Redis, the web process with the console, and a worker")
    os.chdir(ROOT)
    # Replace this process, so Ctrl-C reaches the demo (which stops its Redis) and nothing else.
    os.execv(PYTHON, [str(PYTHON), "-m", "bot", "demo"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Arguments after `test` go to pytest, e.g. `test -k expiry -x`.",
    )
    parser.add_argument("command", choices=["demo", "test"])
    args, rest = parser.parse_known_args()
    if args.command == "test":
        test(rest)
    elif rest:
        parser.error(f"demo takes no arguments (got {' '.join(rest)})")
    else:
        demo()


if __name__ == "__main__":
    main()
