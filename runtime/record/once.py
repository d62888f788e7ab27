"""Lua scripts that take effect once per call, however often the call reaches Redis.

redis-py retries a command whose reply timed out (`retry_on_error` in
`runtime.db.connection`), and callers retry too (`runtime.journal.invoker` records a tool's
output through an outage). A Redis that was only slow (paused, swapping, a long command) then
runs every copy it received: two `executed` entries for one run of a tool, a grant's use counted
twice, a claim that fences off the delivery that sent it. So every script that appends to the
audit trail or counts is registered here: each call carries a token of its own, and the script,
in the same step as its effect, stores its reply under the token; a copy that finds the reply
returns it instead of running again.

The scripts of a run's own hash keep the reply in the hash instead (`RunOnce`,
`runtime/record/lua/once_in_run.lua`): the field `once:<token>` is read with the script's first
read of the hash and written with its write, so the frame costs no command of its own. A copy
that arrives after the hash is gone finds no run, and changes nothing (`close.lua` answers from
the tombstone, and so does the decision script: `finished`, told to the clicker as the run
having finished, since their click may well have decided before it did). A fenced write
without an audit entry keeps no reply (`runtime.record.scripts.FENCED_WRITE`): it neither
appends nor counts, and a copy that runs again writes the same fields under the same fence
(and is refused once a later delivery holds the run); the caller sends nothing else until the
call it retries has answered.

The token's key is `once:<token>` in the shard of the script's first key (`Keys.once`): the
same hash tag, so the same cluster slot. It expires after `ONCE_SECONDS`, longer than any copy
can lag the first: redis-py's retries are over within a minute, a caller's within
`JOB_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import secrets
from typing import Any, Generic

import redis.asyncio as aioredis

from runtime.db.keys import Keys
from runtime.db.lua import C, Script, lua_file

ONCE_SECONDS = 900
"""How long a call's reply is kept for its late copies (the default `JOB_TIMEOUT_SECONDS`)."""

# The frame's two halves, either side of its `-- BODY` line.
_HEAD, _BODY, _TAIL = lua_file("runtime.record", "once").partition("\n-- BODY\n")
if not _BODY:
    raise RuntimeError("runtime/record/lua/once.lua has lost its `-- BODY` line")


def once_body(body: str) -> str:
    """`body` run at most once per token (the last key and argument, which it does not see):
    `runtime/record/lua/once.lua` around it."""
    return f"{_HEAD}\n{body}\n{_TAIL}"


def new_token() -> str:
    """A token for one logical call: pass the same one to each attempt of that call."""
    return secrets.token_hex(12)


class OnceScript(Generic[C]):
    """A registered script whose every call takes effect once (see the module docstring);
    `script.source` is `once_body(...)`'s, as `/readyz` checks it loaded
    (`runtime.readiness`)."""

    def __init__(self, redis: aioredis.Redis, keys: Keys, script: Script[C]) -> None:
        self._script = redis.register_script(script.source)
        self._keys = keys

    async def __call__(self, call: C, *, token: str | None = None) -> Any:
        """Run the script; a caller that retries the call itself passes the same `token`."""
        keys = call.keys()
        marker = self._keys.once(keys[0], token or new_token())
        return await self._script(keys=[*keys, marker], args=[*call.args(), ONCE_SECONDS])


class RunOnce(Generic[C]):
    """A registered script of the run's hash whose every call takes effect once, its reply kept
    in the hash (see the module docstring); `keeps=False`: calls that keep nothing."""

    def __init__(self, redis: aioredis.Redis, script: Script[C], *, keeps: bool = True) -> None:
        self._script = redis.register_script(script.source)
        self._keeps = keeps

    async def __call__(self, call: C, *, token: str | None = None) -> Any:
        """Run the script; a caller that retries the call itself passes the same `token`."""
        kept = (token or new_token()) if self._keeps else ""
        return await self._script(keys=call.keys(), args=[*call.args(), kept])
