"""The credentials a process reports with (in Countersign, the Slack bot token:
`bot.slack.bot_token`), as the platform last judged them.

A token Slack refuses (mistyped, revoked, its workspace deactivated) cannot come right by
asking again: every post fails the same way. So each process asks at start, and `/readyz`
asks again now and then (cached); a refusal is said once, in one line naming the setting,
and fails readiness. The worker then holds what it was doing instead of retrying each post:
a run's job is kept (`runtime.jobs.consumer`) and the due sets wait (`runtime.jobs.due_set`)
until the credentials are accepted again, or the worker restarts with good ones and another
takes the job over. Nothing is dead-lettered for it, and no run is lost.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from runtime.process.shutdown import Shutdown


class Credentials(Protocol):
    name: str
    """The check at start runs as one of the worker's loops (`run`, `stop`)."""

    async def run(self) -> None:
        """Ask the platform until it answers (or `stop`); say so if it refuses."""

    def stop(self) -> None: ...

    @property
    def refused(self) -> bool:
        """Known to be refused right now."""

    def refused_by(self, error: BaseException) -> bool:
        """Whether `error` is the platform refusing the credentials; if so they are known to
        be refused from now on (said once, in the log)."""

    async def until_accepted(self, stopping: Shutdown) -> bool:
        """Wait, asking the platform again now and then, until they are accepted; False if
        `stopping` came first."""

    async def readiness(self) -> dict[str, str]:
        """For `/readyz`: empty unless known to be refused, else what to fix under the name of
        the setting. The platform is asked at most once per a cache period."""


async def held_until_accepted(
    credentials: Credentials, stopping: Shutdown, deadline: asyncio.Timeout
) -> bool:
    """Hold a job until `credentials` are accepted, its `deadline` set aside meanwhile (the
    time it had left counts again after): True to try it again, False if `stopping` came
    first."""
    when = deadline.when()
    if when is None:
        return await credentials.until_accepted(stopping)
    length = when - asyncio.get_running_loop().time()
    deadline.reschedule(None)
    accepted = await credentials.until_accepted(stopping)
    deadline.reschedule(asyncio.get_running_loop().time() + max(length, 0.0))
    return accepted
