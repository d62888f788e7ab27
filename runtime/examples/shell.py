"""Example shell agent: the SDK's `ShellTool` with a local executor; every call needs approval.

After the SDK's own example (`examples/tools/shell.py`). Commands run with `/bin/sh` in a scratch
directory of the worker's own (made at its first command, under the system's temporary
directory, and removed with all it holds when the worker exits), each for at most
`COMMAND_SECONDS` unless the call says otherwise. The card shows
the commands and their timeout; an approval, or an "exact arguments" grant, binds exactly them
(`runtime.calls.description`). In the console: `/agent shell: echo hello >> notes.txt`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    ShellCallOutcome,
    ShellCommandOutput,
    ShellCommandRequest,
    ShellResult,
    ShellTool,
)

COMMAND_SECONDS = 10.0
OUTPUT_BYTES = 4000


class ScratchShell:
    """Runs each command of a call in turn, in one directory, stopping at a timeout."""

    def __init__(self) -> None:
        self._directory: Path | None = None

    @property
    def directory(self) -> Path:
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="countersign-shell-"))
            # Commands of later calls use what earlier ones left there, so it lives as long as
            # the process: removed at its exit (Ctrl-C of the demo too), not left in /tmp.
            weakref.finalize(self, shutil.rmtree, self._directory, ignore_errors=True)
        return self._directory

    async def __call__(self, request: ShellCommandRequest) -> ShellResult:
        action = request.data.action
        seconds = (action.timeout_ms or 0) / 1000 or COMMAND_SECONDS
        outputs = []
        for command in action.commands:
            output = await self._run(command, seconds)
            outputs.append(output)
            if output.outcome.type == "timeout":
                break
        return ShellResult(output=outputs, provider_data={"working_directory": str(self.directory)})

    async def _run(self, command: str, seconds: float) -> ShellCommandOutput:
        process = await asyncio.create_subprocess_shell(
            command,
            cwd=self.directory,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.directory)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), seconds)
            outcome = ShellCallOutcome(type="exit", exit_code=process.returncode)
        except TimeoutError:
            process.kill()
            stdout, stderr = await process.communicate()
            outcome = ShellCallOutcome(type="timeout")
        return ShellCommandOutput(
            command=command,
            stdout=stdout[:OUTPUT_BYTES].decode(errors="replace"),
            stderr=stderr[:OUTPUT_BYTES].decode(errors="replace"),
            outcome=outcome,
        )


shell = Agent[Any](
    name="shell",
    handoff_description="Runs shell commands in a scratch directory.",
    instructions=(
        "You run shell commands for a person in a Slack channel, with the shell tool, in a "
        "scratch directory. Every call needs a person's approval; if one is rejected, read the "
        "reason and do not retry it. Answer briefly, with the commands' output."
    ),
    tools=[ShellTool(executor=ScratchShell(), needs_approval=True)],
)
