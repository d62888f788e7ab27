"""The Procfile's processes, started as written, for tests that need real processes."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[2]


def release(commit: str, into: Path) -> Path | None:
    """This repository's tree at `commit`, written under `into`, to run an older release's
    processes beside this one's (a rolling deploy); None when the clone lacks that history."""
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if known.returncode != 0:
        return None
    tree = into / "release"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


class Process:
    def __init__(
        self,
        name: str,
        command: str,
        env: dict[str, str],
        logs: Path,
        *,
        code: Path = ROOT,
        netns: str | None = None,
    ) -> None:
        """`code`: the tree to run, this one unless a test runs an older release's; `netns`: a
        network namespace to run it in (`tests.support.namespaces`)."""
        self.name = name
        self.log_path = logs / f"{name}.log"
        environ = {**os.environ, **env}
        # `python` in the Procfile must be the interpreter running the tests (the venv's).
        environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}"
        environ.setdefault("PYTHONUNBUFFERED", "1")
        inside = f"ip netns exec {netns} " if netns else ""
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen(
                ["/bin/sh", "-c", f"exec {inside}{command}"],
                cwd=code,
                env=environ,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, sig)

    async def wait(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.popen.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} still running after {timeout}s:\n{self.log()}")
            await asyncio.sleep(0.05)
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        self.signal(signal.SIGKILL)
        self.popen.wait()


async def wait_until_healthy(url: str, process: Process, timeout: float = 20) -> None:
    await wait_for_status(url, process, 200, timeout)


async def wait_for_status(url: str, process: Process, status: int, timeout: float = 20) -> None:
    """Until `process` answers `url` with `status` (e.g. 503: up, but its Redis is not)."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while time.monotonic() < deadline:
            if process.popen.poll() is not None:
                raise AssertionError(f"{process.name} exited:\n{process.log()}")
            try:
                async with session.get(url) as response:
                    if response.status == status:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError(f"{process.name} never answered {status}:\n{process.log()}")


async def wait_for_lines(process: Process, text: str, count: int, timeout: float) -> list[str]:
    """The first `count` lines of the process's log containing `text`, once there are as many."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in process.log_path.read_text().splitlines() if text in line]
        if len(found) >= count:
            return found[:count]
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{process.name} logged {text!r} {len(found)} times, not {count}:\n{process.log()}"
            )
        await asyncio.sleep(0.1)


def within_ceilings(lines: list[str], ceilings: list[float]) -> bool:
    """Whether each line's announced wait ("retrying in 3.47 s") is drawn as the shared backoff
    draws it (`runtime.process.backoff`): between half its ceiling and the ceiling."""
    waits = [
        float(re.findall(r"(?:retrying|restarting it) in ([0-9.e-]+) s", line)[-1])
        for line in lines
    ]
    return len(waits) == len(ceilings) and all(
        ceiling / 2 <= wait <= ceiling for wait, ceiling in zip(waits, ceilings, strict=True)
    )


async def wait_for_log(process: Process, text: str, timeout: float = 20) -> str:
    """The first line of the process's log containing `text`, once there is one."""
    deadline = time.monotonic() + timeout
    while True:
        found = [line for line in process.log_path.read_text().splitlines() if text in line]
        if found:
            return found[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"{process.name} never logged {text!r}:\n{process.log()}")
        await asyncio.sleep(0.1)
