"""Where a `when` is evaluated: in a child process of its own, within a budget of size and time.

A rule's expression reads arguments the model chose. Evaluated on the web's or the worker's
event loop, a 1 MB argument held the loop for most of a second per rule, and a nested macro
(`args.a.exists(x, args.a.exists(y, x == y))`) can take far longer: the `cel` package holds the
GIL while it works, so a thread would not help, and nothing can interrupt it. So each process
starts, on the first `when` it evaluates, one child (`python -m runtime.judging.evaluation`)
that reads one request per line on its standard input and answers one line on its standard
output. The caller waits for the answer in a thread, off the event loop, for at most
`WHEN_SECONDS`; past that, the child is killed (and started afresh for the next request), and
the expression is over budget. Arguments longer than `WHEN_MAX_CHARS` are not sent at all.

Either way, and whenever the child cannot be started, the answer is that the expression cannot
be judged for this call, with the reason in one sentence: a rule that cannot be judged never
makes a call easier (`runtime.policy`).

    outcome = await evaluate(strict_source, variables_json)   # Outcome(holds=True) ...
"""

from __future__ import annotations

import asyncio
import atexit
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

log = logging.getLogger(__name__)

WHEN_SECONDS = 1.0
"""The longest one `when` may take for one call (a plain comparison takes microseconds; the
margin is for a busy machine)."""
WHEN_MAX_CHARS = 65_536
"""The longest arguments (as JSON text) a `when` reads: well above what a rule compares, well
below what makes an evaluation slow."""
START_SECONDS = 30.0
"""How long the child may take to start (an import of `cel`; longer on a busy machine). Not
counted against an expression's budget."""
READY = "ready"
_PASSED_ON = ("PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LANG", "LC_ALL", "TMPDIR")
"""What of the environment the child gets: enough to import Python, none of the secrets."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    holds: bool | None
    """Whether the expression holds; None: it cannot be judged (`reason` says why)."""
    reason: str | None = None


class _Child:
    """The child process and the pipe to it; requests are served one at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pending = b""
        atexit.register(self.stop)

    def ask(self, request: str, budget: float) -> dict[str, Any]:
        """The child's answer to `request`, or `{"error": ...}`; blocks (call it in a thread)."""
        with self._lock:
            try:
                process = self._started()
            except (OSError, TimeoutError) as error:
                log.error("the evaluator of policy conditions cannot start: %s", error)
                self.stop()
                return {"error": "its evaluator could not start"}
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(request.encode() + b"\n")
                process.stdin.flush()
                line = self._line(process.stdout, time.monotonic() + budget)
            except TimeoutError:
                self.stop()  # stuck: the next request starts a new one
                return {"error": f"it took longer than {budget:g} s"}
            except OSError as error:
                log.error("the evaluator of policy conditions stopped: %s", error)
                self.stop()
                return {"error": "its evaluator stopped"}
            try:
                answer: dict[str, Any] = json.loads(line)
            except ValueError:
                self.stop()
                return {"error": "its evaluator answered something else"}
            return answer

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._pending = b""
        process = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
            env={
                **{name: os.environ[name] for name in _PASSED_ON if name in os.environ},
                "PYTHONUNBUFFERED": "1",
            },
        )
        self._process = process
        assert process.stdout is not None
        if self._line(process.stdout, time.monotonic() + START_SECONDS) != READY:
            raise OSError("it did not say it was ready")
        return process

    def _line(self, stream: IO[bytes], deadline: float) -> str:
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([stream], [], [], left)[0]:
                raise TimeoutError
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                raise OSError("the evaluator exited")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode()

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


_CHILD = _Child()


async def evaluate(source: str, variables: str, *, budget: float = WHEN_SECONDS) -> Outcome:
    """Evaluate `source` (a rewritten `when`, `runtime.judging.comparisons`) on `variables`
    (JSON text of the expression's variables) in the child, off the event loop."""
    if len(variables) > WHEN_MAX_CHARS + 1024:  # the facts besides the arguments are short
        return Outcome(holds=None, reason=too_large(len(variables)))
    request = json.dumps({"source": source, "variables": variables})
    answer = await asyncio.to_thread(_CHILD.ask, request, budget)  # off the event loop
    if "error" in answer:
        return Outcome(holds=None, reason=str(answer["error"]))
    return Outcome(holds=bool(answer["holds"]))


def too_large(chars: int) -> str:
    return (
        f"the arguments are {chars:,} characters long, more than the {WHEN_MAX_CHARS:,} "
        "a `when` reads"
    )


# --- the child ------------------------------------------------------------------------------


def answer(request: dict[str, Any], programs: dict[str, Any]) -> dict[str, Any]:
    """One request's answer: `{"holds": bool}` or `{"error": reason}` (in the child)."""
    import cel  # loaded before the child says it is ready (`serve`)

    from runtime.judging.comparisons import strict_functions

    source = request["source"]
    program = programs.get(source)
    if program is None:
        program = programs[source] = cel.compile(source)
    mismatches: list[str] = []
    context = cel.Context(
        variables=json.loads(request["variables"]), functions=strict_functions(mismatches)
    )
    try:
        result = program.execute(context)
    except KeyError as error:
        return {"error": f"the call has no `{error.args[0]}`"}
    except Exception as error:  # noqa: BLE001 -- any error: the expression cannot be judged
        if mismatches:
            return {"error": f"it compares {mismatches[-1]}"}
        return {"error": _reason(error)}
    if not isinstance(result, bool):
        return {"error": "it gives a value that is not true or false"}
    return {"holds": result}


def _reason(error: Exception) -> str:
    text = str(error)
    if text.startswith("No such overload"):
        return "it compares or combines values of different types"
    if isinstance(error, ArithmeticError):
        return f"it fails ({text.split(' in CEL')[0]})"
    if text.startswith("Undefined variable or function"):
        name = text.split("'")[1] if "'" in text else "?"
        return f"it names `{name}`, which is not defined for this call"
    return "it fails: " + text.split(". ")[0][:160]


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    """The child's loop: one request per line in, one answer per line out, until stdin ends."""
    import cel  # noqa: F401 -- loaded now, so no request pays for it

    import runtime.judging.comparisons  # noqa: F401

    programs: dict[str, Any] = {}
    # Started: from here on, `cel` would print each refused comparison (a normal outcome).
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    stdout.write(READY + "\n")
    stdout.flush()
    for line in stdin:
        try:
            reply = answer(json.loads(line), programs)
        except Exception as error:  # noqa: BLE001 -- a request it cannot read: answered, not fatal
            reply = {"error": "it fails: " + str(error).split(". ")[0][:160]}
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


if __name__ == "__main__":
    serve(sys.stdin, sys.stdout)
