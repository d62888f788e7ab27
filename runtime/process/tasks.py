"""A set of background tasks that someone owns: kept referenced, logged, drained on shutdown."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger(__name__)


class TaskSet:
    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, work: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            log.error("%s task %s failed", self._name, task.get_name(), exc_info=error)

    async def wait(self, grace: float) -> None:
        """Wait until every task has finished, or `grace` seconds have passed."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)

    def cancel_all(self) -> int:
        pending = [task for task in self._tasks if not task.done()]
        for task in pending:
            task.cancel()
        return len(pending)
