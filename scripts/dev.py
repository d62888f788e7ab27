#!/usr/bin/env python3
"""Set up and run Countersign with nothing but Python >= 3.11 installed.

    python3 scripts/dev.py demo     # venv + dependencies, then the local console (no Slack app,
                                    # no OpenAI key, no Redis needed): http://localhost:3000/console
    python3 scripts/dev.py test     # venv + dependencies, then ruff, mypy, lint-imports, the tests
    python3 scripts/dev.py test --latest   # the same on the newest releases pyproject.toml allows
    python3 scripts/dev.py lock [--upgrade]  # write the lock files again (uv, from the dev tools)
    python3 scripts/dev.py soak --steps N --seed S  # the promise's model, long (tests/promise/)

Both create `.venv/` in the repository and install into it exactly what a lock file names, each
file checked against its hash (`requirements/demo.txt` for `demo`, `requirements/dev.txt` for
`test`), then the project itself. `demo` starts a Redis of its own, with its files in `.redis/`.
`test` also installs Debian's Chromium for the browser test, nftables for the partition tests and
libfaketime for the clock tests and the promise's model when they are missing and this runs as
root (as CI does); extra arguments go to pytest.
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
LATEST_VENV = ROOT / ".venv-latest"
DEV_LOCK = ROOT / "requirements" / "dev.txt"
DEMO_LOCK = ROOT / "requirements" / "demo.txt"
APP_LOCK = ROOT / "requirements.txt"
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
BROWSER_PACKAGES = ("chromium", "fonts-noto-color-emoji")
FAULT_PACKAGES = {"nft": ("nftables",), "faketime": ("faketime", "libfaketime")}
"""A command the fault tests need -> the Debian packages that bring it: nftables partitions the
test's own network namespaces (tests/faults/test_partitions.py), libfaketime skews a process's clock
(tests/faults/test_clock_skew.py)."""
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


def python_of(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts" if os.name == "nt" else "bin") / "python"


def create_venv(venv_dir: Path) -> Path:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script runs before any venv exists
        sys.exit(f"Countersign needs Python 3.11 or newer; this is {sys.version.split()[0]}.")
    python = python_of(venv_dir)
    if not python.exists():
        say(f"creating {venv_dir.relative_to(ROOT)}")
        venv.create(venv_dir, with_pip=True)
    return python


def ensure_environment(lock: Path) -> Path:
    """The venv's python, with exactly what `lock` names installed (every file checked against
    its hash, nothing else resolved) and the project on top, unless already done for this lock
    and this pyproject.toml."""
    python = create_venv(VENV)
    stamp = VENV / ".installed"
    digest = hashlib.sha256(lock.read_bytes() + (ROOT / "pyproject.toml").read_bytes())
    try:
        installed = json.loads(stamp.read_text())
    except (OSError, ValueError):
        installed = {}
    if installed.get(lock.name) == digest.hexdigest():
        return python
    say(f"installing {lock.relative_to(ROOT)} into {VENV.relative_to(ROOT)}")
    pip: list[str | Path] = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    run(*pip, "--require-hashes", "--no-deps", "-r", lock)
    # The lock holds setuptools too, so the project's own build uses the pinned one.
    run(*pip, "--no-deps", "--no-build-isolation", "-e", ".")
    # One entry per lock: `demo` after `test` finds its packages already there.
    stamp.write_text(json.dumps({**installed, lock.name: digest.hexdigest()}))
    return python


def ensure_latest() -> Path:
    """A venv of its own with the newest releases that pyproject.toml's ranges allow, resolved
    now (not from the lock), so a release that breaks the code is found before a newcomer
    meets it in a refreshed lock."""
    python = create_venv(LATEST_VENV)
    say(f"installing the newest allowed releases into {LATEST_VENV.relative_to(ROOT)}")
    pip: list[str | Path] = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    run(*pip, "--upgrade", "pip", "setuptools")
    run(*pip, "--upgrade", "--upgrade-strategy", "eager", "-e", ".[dev,demo]")
    say("versions that differ from requirements/dev.txt:")
    locked: dict[str, set[str]] = {}
    # A package can be pinned twice, for different Pythons (`numpy==2.4.6 ; python < '3.12'`).
    for name, version in _pins(DEV_LOCK.read_text()):
        locked.setdefault(name, set()).add(version)
    frozen = subprocess.run(
        [python, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
    )
    for name, version in _pins(frozen.stdout):
        if name in locked and version not in locked[name]:
            print(f"    {name} {' or '.join(sorted(locked[name]))} -> {version}", flush=True)
    return python


def _pins(text: str) -> list[tuple[str, str]]:
    """(name, version) of each `name==version` line, names normalised as pip does."""
    pins = []
    for line in text.splitlines():
        name, equals, version = line.partition("==")
        if equals and not line.startswith((" ", "#")):
            normal = name.strip().lower().replace("_", "-").replace(".", "-")
            pins.append((normal, version.split(";")[0].split()[0].strip()))
    return pins


BUILD = Path("requirements") / "build.in"
LOCKS: dict[Path, list[str | Path]] = {
    DEV_LOCK: [BUILD, "--extra", "dev", "--extra", "demo"],
    DEMO_LOCK: [BUILD, "--extra", "demo"],
    # Heroku installs this one; the Procfile runs the packages from the checkout.
    APP_LOCK: [],
}


def lock(upgrade: bool) -> None:
    """Write the three lock files from pyproject.toml with uv (a dev tool, itself locked).

    pip never resolves at install time: `ensure_environment` installs a lock with
    `--require-hashes --no-deps`, so what it installs is exactly what was tested.

    Each resolves for every platform and Python the project supports (`--universal`). The demo's
    and the app's are resolved within the dev lock (`--constraint`), so all three agree.
    Without `--upgrade`, a pin changes only where pyproject.toml no longer allows it.
    """
    python = ensure_environment(DEV_LOCK)
    uv = python.parent / "uv"
    os.chdir(ROOT)  # the lock files name their sources relative to it
    for path, sources in LOCKS.items():
        constrained: list[str | Path] = [] if path == DEV_LOCK else ["--constraint", DEV_LOCK]
        say(f"locking {path.relative_to(ROOT)}")
        run(
            uv, "pip", "compile", "pyproject.toml", *sources, *constrained,
            "--universal", "--generate-hashes", "--quiet",
            "--custom-compile-command", "python3 scripts/dev.py lock",
            *(["--upgrade"] if upgrade and path == DEV_LOCK else []),
            "--output-file", path.relative_to(ROOT),
        )  # fmt: skip


def ensure_chromium() -> None:
    """Debian's Chromium for the browser test; installed with apt-get when this runs as root.

    Without it the browser test is skipped on a developer's machine and fails in CI.
    """
    if CHROMIUM.exists():
        return
    if not apt_install(BROWSER_PACKAGES, "the browser test"):
        say(f"no Chromium at {CHROMIUM}: `sudo apt-get install chromium` to run the browser test")


def ensure_fault_tools() -> None:
    """nftables and libfaketime for the partition and clock tests, as root only: without them
    (or without root, which network namespaces need) those tests are skipped, saying why."""
    for command, packages in FAULT_PACKAGES.items():
        if shutil.which(command) is None and not apt_install(packages, "the fault tests"):
            say(f"no `{command}`: `sudo apt-get install {' '.join(packages)}` for the fault tests")


def apt_install(packages: tuple[str, ...], purpose: str) -> bool:
    """Install Debian's `packages` with apt-get, as root only; whether they are installed."""
    apt = shutil.which("apt-get")
    if apt is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False
    say(f"installing Debian's {' '.join(packages)} for {purpose}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "-q", *packages]

    def apt_get(*command: str) -> bool:
        done = subprocess.run(command, stdout=subprocess.DEVNULL, env=env, check=False)
        return done.returncode == 0

    # A fresh machine has no package lists yet: update once, only if the install needs it.
    return apt_get(*install) or (apt_get(apt, "update", "-q") and apt_get(*install))


def soak(steps: int, seed: int | None) -> None:
    """The promise's model for as long as asked (`soak --steps N --seed S`): it prints the
    steps run and sequences tried and ends with `violations: N`, exiting 1 when N > 0."""
    python = ensure_environment(DEV_LOCK)
    ensure_fault_tools()
    os.chdir(ROOT)
    chosen = ["--steps", str(steps), *(["--seed", str(seed)] if seed is not None else [])]
    sys.exit(subprocess.run([python, "-m", "tests.promise.soak", *chosen]).returncode)


def test(pytest_args: list[str], latest: bool) -> None:
    python = ensure_latest() if latest else ensure_environment(DEV_LOCK)
    ensure_chromium()
    ensure_fault_tools()
    say("ruff")
    run(python, "-m", "ruff", "check", ".")
    run(python, "-m", "ruff", "format", "--check", ".")
    say("mypy (strict)")
    run(python, "-m", "mypy")
    say("lint-imports (the floors in pyproject.toml)")
    run(python.parent / "lint-imports")
    say("pytest")
    # Three pytest workers, a test file each at a time: most of a test's time is spent waiting
    # on real processes (two workers kept two cores 60% busy), so three finish sooner even on
    # two cores: 523 s against 817 s for the same 705 tests. `-n 0` runs serially.
    chosen = any(a.startswith(("-n", "--numprocesses")) for a in pytest_args)
    if chosen or any(a.startswith("-m") for a in pytest_args):
        run(python, "-m", "pytest", *([] if chosen else PARALLEL), *pytest_args)
        return
    # The chaos tests kill processes and stop Redis against deadlines, which two other test
    # files on the same two cores stretch (two of them failed together in one CI run so), so
    # they run after the rest, one at a time (413 s for 11 of them).
    first = run(python, "-m", "pytest", *PARALLEL, "-m", "not chaos", *pytest_args, allow=NONE)
    say("pytest: the chaos tests, one at a time")
    then = run(python, "-m", "pytest", "-n", "0", "-m", "chaos", *pytest_args, allow=NONE)
    if first == then == NONE:
        sys.exit(NONE)  # the arguments chose no test at all


def demo() -> None:
    python = ensure_environment(DEMO_LOCK)
    say("starting the demo: Redis, the web process with the console, and a worker")
    os.chdir(ROOT)
    # Replace this process, so Ctrl-C reaches the demo (which stops its Redis) and nothing else.
    os.execv(python, [str(python), "-m", "bot", "demo"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        epilog="Arguments after `test` go to pytest, e.g. `test -k expiry -x`.",
    )
    parser.add_argument("command", choices=["demo", "test", "lock", "soak"])
    parser.add_argument(
        "--latest", action="store_true", help="test: on the newest releases pyproject allows"
    )
    parser.add_argument("--upgrade", action="store_true", help="lock: move every pin forward")
    parser.add_argument("--steps", type=int, default=2000, help="soak: steps to run")
    parser.add_argument("--seed", type=int, default=None, help="soak: the seed (else random)")
    args, rest = parser.parse_known_args()
    if args.command == "test":
        test(rest, args.latest)
    elif rest:
        parser.error(f"{args.command} takes no further arguments (got {' '.join(rest)})")
    elif args.command == "lock":
        lock(args.upgrade)
    elif args.command == "soak":
        soak(args.steps, args.seed)
    else:
        demo()


if __name__ == "__main__":
    main()
