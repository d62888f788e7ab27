"""The worker's loop over the job queue (`runtime.jobs.queue`): read, take over, heartbeat, time
out.

Up to `concurrency` jobs run at once. Each free slot is filled with a dead worker's job if one
is due, else with a new one; running jobs are heartbeated until they finish or overrun
`JOB_TIMEOUT_SECONDS`; on stop, running jobs get most of the shutdown budget and the rest are
cancelled and handed back within it. One that raises `RecursionError` is dead-lettered at once.

A job that fails because Redis is away (no answer, a cluster down, replicas that do not
confirm under `REDIS_MIN_REPLICAS`, or full and refusing writes: `runtime.jobs.outages`) is not
at fault: it is retried in place, kept and heartbeated, within its timeout. Given back, each try
would spend one of its `JOB_MAX_DELIVERIES`, and an outage of a few idle timeouts would end the
run as given up. So is one its reporter's credentials fail (a revoked Slack token), past its
timeout, until they are accepted. One whose primary changed while it ran (`PrimaryChanged`)
runs again on the new one before it is acknowledged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from runtime.db.connection import describe_failure
from runtime.db.replication import PrimaryChanged
from runtime.jobs.handoffs import LeftForTakeover, RunAgain, TakenOver
from runtime.jobs.live_workers import FULL_SCAN_SECONDS, LiveWorkers
from runtime.jobs.outages import redis_away, setting_to_check
from runtime.jobs.queue import START, Delivery, Handler, JobQueue, Overtaken
from runtime.process.backoff import Backoff
from runtime.process.credentials import Credentials, held_until_accepted
from runtime.process.shutdown import Shutdown
from runtime.process.shutdown_budget import ShutdownBudget
from runtime.process.tasks import TaskSet

log = logging.getLogger(__name__)
# Of the shutdown budget, running jobs get all but the end: this share of it, at most this long,
# is kept for cancelling the rest (first half) and handing them back (second half).
AFTER_JOBS_SHARE = 0.2
AFTER_JOBS_MAX_SECONDS = 5.0
HAND_BACK_MIN_SECONDS = 1.0
"""Two Redis calls; given this long even when the budget is spent, or jobs wait an idle timeout."""
REDIS_AWAY_FIRST_RETRY_SECONDS = 0.25
REDIS_AWAY_RETRY_MAX_SECONDS = 5.0
"""The longest pause between in-place tries of a job while Redis is away (backing off to it)."""


@dataclass(kw_only=True)
class JobConsumer:
    """Runs jobs from the queue, up to `concurrency` at once, until stopped."""

    queue: JobQueue
    consumer: str
    handler: Handler
    on_dead: Handler
    concurrency: int
    idle_timeout: float
    max_deliveries: int
    job_timeout: float = 900.0
    """`JOB_TIMEOUT_SECONDS`: a handler running longer is cancelled and its job retried."""
    shutdown: ShutdownBudget = field(default_factory=lambda: ShutdownBudget(seconds=25.0))
    """The worker's whole shutdown, from stop() (Heroku sends SIGKILL 30 s after SIGTERM)."""
    block_ms: int = 30_000
    """The longest one read of new jobs waits (capped by what its client allows, and by a third
    of the idle timeout, so that a dead worker's jobs are taken over in time): an idle worker
    sends one read and one take-over scan per such wait."""
    consumer_gone_after: float = 3600.0
    """Each boot reads under a name of its own (`worker.1:3f9a1c`), so the names of stopped
    ones pile up in the group: one that holds no job and has not read this long is dropped."""
    forget_interval: float = 1800.0
    """How often to look for such consumers: one script per shard."""
    redis_setting: str = "REDIS_URL"
    """The variable(s) naming this Redis, for the operator to check while it does not answer."""
    live: LiveWorkers | None = None
    """With several shards: scan them for a dead worker's jobs only when one is overdue
    (`runtime.jobs.live_workers`); with one, a scan is one command, cheaper than asking."""
    credentials: Credentials | None = None  # the reporter's: a job they fail is held
    _running: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    _slots: asyncio.Semaphore = field(init=False)
    _stopping: Shutdown = field(default_factory=Shutdown)
    _tasks: TaskSet = field(default_factory=lambda: TaskSet("jobs"))
    _next_reclaim: float = 0.0
    _reclaim_cursor: str = START
    _next_forget: float = 0.0
    _next_full_scan: float = 0.0
    _others_overdue: bool = False
    _scan_until: float = 0.0
    """A job of ours was cut off (`JOB_TIMEOUT_SECONDS`): scan for it until then."""

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)

    async def run(self) -> None:
        """Run jobs until stop(); then let running ones finish within the grace period."""
        with contextlib.suppress(RedisError):  # away again: the read loop waits, then makes it
            await self.queue.ensure_group()
        drained = asyncio.Event()
        heartbeat = asyncio.get_running_loop().create_task(self._heartbeat_loop(drained))
        try:
            await self._read_loop()
            await self._drain()
        finally:
            drained.set()
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    def stop(self) -> None:
        """Take no new jobs; run() returns once running ones are done or handed back."""
        self.shutdown.start()
        self._stopping.set()

    async def _drain(self) -> None:
        after_jobs = min(AFTER_JOBS_MAX_SECONDS, self.shutdown.seconds * AFTER_JOBS_SHARE)
        await self._tasks.wait(grace=self.shutdown.left(keep=after_jobs))
        unfinished = self._tasks.cancel_all()
        await self._tasks.wait(grace=self.shutdown.left(keep=after_jobs / 2))
        try:
            async with asyncio.timeout(max(self.shutdown.left(), HAND_BACK_MIN_SECONDS)):
                idle_ms = int(self.idle_timeout * 1000) + 1
                handed = await self.queue.hand_back(self.consumer, idle_ms)
                if handed == 0:
                    await self.queue.forget_consumer(self.consumer)
                if self.live is not None:
                    await self.live.left(self.consumer, handed_back=handed)
        except (RedisError, TimeoutError) as error:
            log.warning(  # one plain line: the reason, not a traceback per stop
                "stopped: %d job(s) cancelled, none handed back: Redis is away (%s; check %s); "
                "they are taken over after JOB_IDLE_TIMEOUT_SECONDS once it is back",
                unfinished,
                type(error).__name__,
                self.redis_setting,
            )
            return
        log.info("stopped: %d job(s) cancelled, %d handed back", unfinished, handed)

    async def _read_loop(self) -> None:
        """Wait for a free slot, then fill every free one: with a dead worker's job if one is
        due, else with new ones, all in one read.

        One read per free slot would cap the start rate at one job per round trip through a
        busy event loop: with hundreds of slots and a model that takes seconds, most slots
        would sit empty while jobs wait in the stream (bench/concurrency.py measures it).
        """
        while not self._stopping.is_set():
            await self._slots.acquire()
            free = 1 + await self._take_free_slots()
            if self._stopping.is_set():
                self._release(free)
                return
            try:
                await self._forget_gone_consumers()
                taken = await self._take_over_one()
                deliveries = [taken] if taken else await self._read(free)
            except RedisError as error:
                self._release(free)
                if await self.queue.remade_if_lost(error):
                    continue
                log.warning("job queue unreachable (%s); retrying in 1 s", describe_failure(error))
                await self._stopping.sleep(1.0)
                continue
            for delivery in deliveries:
                self._start(delivery)
            self._release(free - len(deliveries))

    async def _take_free_slots(self) -> int:
        """Take every slot free right now (none is waited for); how many."""
        taken = 0
        while not self._slots.locked():
            await self._slots.acquire()  # free: returns at once
            taken += 1
        return taken

    def _release(self, slots: int) -> None:
        for _ in range(slots):
            self._slots.release()

    async def _read(self, count: int) -> list[Delivery]:
        longest = min(self.block_ms, self.queue.longest_block_ms, int(self.idle_timeout * 1000 / 3))
        block_ms = max(50, longest)
        # A read cut short by stop may have been delivered to us; drain() hands it back.
        return (
            await self._stopping.unless_stopped(self.queue.read(self.consumer, count, block_ms))
            or []
        )

    async def _forget_gone_consumers(self) -> None:
        clock = asyncio.get_running_loop()
        if clock.time() < self._next_forget:
            return
        self._next_forget = clock.time() + self.forget_interval  # also after a failure
        gone = await self.queue.forget_idle_consumers(int(self.consumer_gone_after * 1000))
        if gone:
            log.info("dropped %d stopped consumer(s) from the group: %s", len(gone), gone)

    async def _take_over_one(self) -> Delivery | None:
        """A job whose owner went quiet, if one is due; burying those that failed too often.

        Each tick scans one stretch of the pending list, on from where the last one stopped, so
        a pass over it takes a bounded number of ticks however many live jobs are ahead.
        """
        clock = asyncio.get_running_loop()
        if clock.time() < self._next_reclaim:
            return None
        if self._reclaim_cursor == START and not self._scan_wanted(clock.time()):
            self._next_reclaim = clock.time() + self.idle_timeout / 3
            return None
        idle_ms = int(self.idle_timeout * 1000)
        while True:
            page = await self.queue.reclaim(self.consumer, idle_ms, 1, self._reclaim_cursor)
            self._reclaim_cursor = page.cursor
            for delivery in page.deliveries:
                if delivery.entry_id in self._running:
                    # Ours, running, idle only while heartbeats missed Redis: never run it twice.
                    continue
                if delivery.deliveries <= self.max_deliveries:
                    log.warning(
                        "job %s taken over (delivery %d)", delivery.entry_id, delivery.deliveries
                    )
                    return delivery
                await self._bury(delivery)
            if page.cursor == START:
                # A full pass: no other job can go quiet before a heartbeat interval.
                self._next_reclaim = clock.time() + self.idle_timeout / 3
                return None
            if not page.deliveries:
                return None  # the rest of the pending list on the next tick

    def _scan_wanted(self, now: float) -> bool:
        if self.live is None or self._others_overdue or now < self._scan_until:
            return True
        if now >= self._next_full_scan:
            self._next_full_scan = now + FULL_SCAN_SECONDS
            return True
        return False

    async def _bury(self, delivery: Delivery, reason: str | None = None) -> None:
        await self.queue.bury(delivery, reason or f"failed {delivery.deliveries - 1} times")
        log.error("job %s moved to the dead-letter stream", delivery.entry_id)
        self._tasks.spawn(self.on_dead(delivery), name=f"dead:{delivery.entry_id}")

    async def _heartbeat_loop(self, drained: asyncio.Event) -> None:
        """Keep our running jobs from looking abandoned, also while draining.

        Ends on `drained` as well as on cancellation: a cancel that lands while the Redis call
        is in flight can be swallowed by the client, and the loop must end all the same.
        """
        await self._say_alive()
        while not drained.is_set():
            await asyncio.sleep(self.idle_timeout / 3)
            try:
                await self.queue.heartbeat(self.consumer, list(self._running))
            except RedisError as error:
                log.warning("job heartbeat failed (%s); retrying", describe_failure(error))
                continue  # no mark either: it must not outlive the jobs' heartbeat
            await self._say_alive()

    async def _say_alive(self) -> None:
        if self.live is None:
            return
        try:
            self._others_overdue = await self.live.beat(self.consumer)
        except RedisError as error:
            log.warning("could not mark this worker alive (%s); retrying", describe_failure(error))
            self._others_overdue = True  # cannot tell: scan as before

    def _start(self, delivery: Delivery) -> None:
        task = self._tasks.spawn(self._run_one(delivery), name=f"job:{delivery.entry_id}")
        self._running[delivery.entry_id] = task

    async def _run_one(self, delivery: Delivery) -> None:
        try:
            await self._handle_in_time(delivery)
        except TakenOver:
            log.info("job %s was taken over by another worker; left to it", delivery.entry_id)
        except LeftForTakeover:
            pass  # said in the log where it was decided
        except RecursionError:
            # Something nested too deep to handle: every delivery would fail the same way.
            log.exception("job %s: input nested too deeply; not retried", delivery.entry_id)
            with contextlib.suppress(RedisError):  # unburied, it is retried and buried then
                await self._bury(delivery, "input nested too deeply to handle")
        except Exception:
            # Not acknowledged: once idle it is reclaimed, and buried after too many tries.
            log.exception("job %s failed; it will be retried", delivery.entry_id)
        finally:
            self._running.pop(delivery.entry_id, None)
            self._slots.release()

    async def _handle_in_time(self, delivery: Delivery) -> None:
        """Run the handler and acknowledge the job, unless they overrun the job timeout.

        Without a bound a hung handler would be heartbeated, so kept from every other worker,
        for ever. Cut off, its job is neither acknowledged nor heartbeated any more: it is taken
        over after the idle timeout like a dead worker's, and dead-lettered after too many tries.
        """
        deadline = asyncio.timeout(self.job_timeout)
        try:
            async with deadline:
                while True:
                    if not await self._tried(delivery, deadline):
                        continue  # held until the credentials were accepted: again
                    try:
                        await self._while_redis_is_away(delivery, self._ack)
                        break
                    except RunAgain as changed:
                        # Its writes may have gone with the old primary: redone on this one.
                        log.warning("job %s: %s", delivery.entry_id, changed)
                        if not await self._still_held(delivery):
                            raise TakenOver from None
        except TimeoutError:
            if not deadline.expired():
                raise  # the handler's own timeout: a failure like any other
            # Heartbeated no more, it goes quiet while we are alive: scan until it is taken.
            loop = asyncio.get_running_loop()
            self._scan_until = loop.time() + 2 * self.idle_timeout + self.idle_timeout / 3
            log.error(
                "job %s ran longer than JOB_TIMEOUT_SECONDS (%g s) and was cancelled; "
                "it will be retried",
                delivery.entry_id,
                self.job_timeout,
            )

    async def _tried(self, delivery: Delivery, deadline: asyncio.Timeout) -> bool:
        """Run the handler; False to run it again (held until its credentials were accepted)."""
        try:
            await self._while_redis_is_away(delivery, self._attempt)
            return True
        except Overtaken:
            tried = True  # acknowledged if still ours
        except Exception as error:
            if self.credentials is None or not self.credentials.refused_by(error):
                raise
            if not await held_until_accepted(self.credentials, self._stopping, deadline):
                raise LeftForTakeover from None
            tried = False
        if not await self._still_held(delivery):
            raise TakenOver from None
        return tried

    async def _still_held(self, delivery: Delivery) -> bool:
        """Whether this worker still holds the job (so may try it again): one cut off from Redis
        past the idle timeout has had it taken over, and must not take the run back."""
        try:
            return await self.queue.keep(self.consumer, delivery.entry_id)
        except RedisError:
            return True  # still away: the next try fails the same way, and asks again

    async def _attempt(self, delivery: Delivery) -> None:
        if not await self.queue.pin(self.consumer, delivery.entry_id):
            raise TakenOver  # a delivery from the old primary: the new one's own runs the job
        await self.handler(delivery)

    async def _ack(self, delivery: Delivery) -> None:
        try:
            await self.queue.ack(delivery.entry_id)
        except PrimaryChanged as error:
            raise RunAgain(str(error)) from None  # not retried here: the handler runs again

    async def _while_redis_is_away(self, delivery: Delivery, work: Handler) -> None:
        """`work(delivery)`, tried again in place for as long as it fails because Redis is away."""
        backoff = Backoff(REDIS_AWAY_FIRST_RETRY_SECONDS, REDIS_AWAY_RETRY_MAX_SECONDS)
        while True:
            try:
                await work(delivery)
                return
            except Exception as error:
                away = redis_away(error)
                if away is None:
                    raise
                setting = setting_to_check(away)
                pause = backoff.failed()
                log.warning(
                    "job %s: Redis is away (%s: %s; check %s); kept, and tried again in %g s",
                    delivery.entry_id,
                    type(away).__name__,
                    away,
                    setting,
                    pause,
                )
            if await self._stopping.sleep(pause):
                # A new try now could start an approved tool that the shutdown then cuts off
                # (its outcome lost, a person asked): left unacknowledged, for a takeover.
                log.warning(
                    "job %s: Redis is still away and the worker is stopping; not tried again "
                    "here, it is taken over once Redis is back",
                    delivery.entry_id,
                )
                raise LeftForTakeover
            if not await self._still_held(delivery):
                raise TakenOver
