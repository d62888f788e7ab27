"""The example shell agent's scratch directory goes away with the process that made it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.processes import ROOT

MADE = """
from runtime.examples.shell import shell
executor = shell.tools[0].executor
(executor.directory / "notes.txt").write_text("hello")
print(executor.directory, flush=True)
"""


def test_the_scratch_directory_is_removed_when_the_worker_exits() -> None:
    """`/agent shell: echo hello >> notes.txt` left a countersign-shell-* folder in /tmp for
    each worker that ever ran a command."""
    done = subprocess.run(
        [sys.executable, "-c", MADE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    directory = Path(done.stdout.strip())
    assert directory.name.startswith("countersign-shell-")
    assert not directory.exists(), "removed at exit, with what the commands left"
