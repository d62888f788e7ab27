"""From the queue to the runs: each delivery a start or a resume on the executor."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import ValidationError

from runtime.jobs.contracts import JOB, ResumeJob, StartJob
from runtime.jobs.queue import Delivery
from runtime.process.logs import bind_log_context
from runtime.runs.executor import RunExecutor

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class JobRouter:
    """Turns a delivery into a call on the executor."""

    executor: RunExecutor

    async def handle(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is None:
            return
        bind_log_context(run_id=job.run_id, event=job.kind)  # each job runs in a task of its own
        if isinstance(job, StartJob):
            await self.executor.start(job)
        else:
            await self.executor.resume(job)

    async def on_dead(self, delivery: Delivery) -> None:
        job = self._parse(delivery)
        if job is not None:
            bind_log_context(run_id=job.run_id, event="dead_letter")
            await self.executor.on_dead_job(job, "")

    @staticmethod
    def _parse(delivery: Delivery) -> StartJob | ResumeJob | None:
        try:
            return JOB.validate_json(delivery.payload)
        except ValidationError:
            # Retrying cannot fix it; it is dropped (acknowledged) with one log line.
            log.error("job %s is malformed and was dropped", delivery.entry_id)
            return None
