"""Republishing Home tabs when something changes for their viewers.

Every change worth showing already lands in the audit trail (a run started, a call asked for,
decided, expired or escalated, a run resumed, stopped, finished or failed), from whichever
process made it. The web process follows the trail and refreshes the tabs of the people each
event concerns who opened theirs lately: the run's requester ("Your runs"), whoever decided, and
everyone who may decide the run's open calls ("Waiting for you"). `HomeTab.refresh` debounces.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from pydantic import ValidationError
from redis.exceptions import RedisError

from bot.approvers import ApproverDirectory, DirectoryUnavailable
from bot.home_tab import HomeTab
from runtime import run_record as rr
from runtime.audit_events import AuditEvent
from runtime.keys import Keys
from runtime.run_record import CallGate
from runtime.stopping import Stopping
from runtime.task_set import TaskSet

log = logging.getLogger(__name__)

BLOCK_MS = 500
"""One read of the trail waits at most this long (under the web's Redis socket timeout)."""
UNCHANGED = frozenset({AuditEvent.DENIED, AuditEvent.EXECUTED, AuditEvent.REPLAYED})
GATE_WAIT_SECONDS = 3.0
"""`requested` is written just before the call's gate: how long to look for the gate."""


@dataclass(kw_only=True)
class HomeWatch:
    redis: aioredis.Redis
    keys: Keys
    home: HomeTab
    directory: ApproverDirectory
    tasks: TaskSet
    _stopping: Stopping = field(default_factory=Stopping)

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        last = await self._tail_start()
        while not self._stopping.is_set():
            try:
                reply: Any = await self.redis.xread(
                    {self.keys.audit: last}, count=200, block=BLOCK_MS
                )
                for _stream, entries in reply or []:
                    for entry_id, fields in entries:
                        last = entry_id
                        await self._changed(fields)
            except RedisError:
                log.warning("home tabs: the audit trail cannot be read; retrying")
                await self._stopping.sleep(1.0)

    async def _tail_start(self) -> str:
        while not self._stopping.is_set():
            try:
                newest: Any = await self.redis.xrevrange(self.keys.audit, count=1)
                return _text(newest[0][0]) if newest else "0-0"
            except RedisError:
                await self._stopping.sleep(1.0)
        return "0-0"

    async def _changed(self, fields: dict[bytes, bytes]) -> None:
        event = _text(fields.get(b"event", b""))
        if event in UNCHANGED:
            return
        run_id = _text(fields.get(b"run_id", b""))
        try:
            details = json.loads(fields.get(b"details", b"{}"))
        except ValueError:
            details = {}
        if not isinstance(details, dict):
            return
        if event == AuditEvent.REQUESTED:
            approval_id = str(details.get("approval_id", ""))
            self.tasks.spawn(self._after_request(run_id, approval_id), name=f"home-watch:{run_id}")
            return
        await self._refresh(run_id, details)

    async def _after_request(self, run_id: str, approval_id: str) -> None:
        """Once the call's gate is written, the people who may decide it are known."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + GATE_WAIT_SECONDS
        try:
            while loop.time() < deadline:
                if await self.redis.hexists(self.keys.run(run_id), rr.GATE + approval_id):
                    await self._refresh(run_id, {})
                    return
                await self._stopping.sleep(0.1)
        except RedisError:
            log.warning("home tabs: run %s not followed", run_id)

    async def _refresh(self, run_id: str, details: dict[str, Any]) -> None:
        try:
            people = await self._concerned(run_id, details)
            for person in await self.home.viewers(people):
                self.home.refresh(person)
        except RedisError:
            log.warning("home tabs: run %s not followed", run_id)

    async def _concerned(self, run_id: str, details: dict[str, Any]) -> set[str]:
        people = {str(details[k]) for k in ("requester", "user_id") if details.get(k)}
        key = self.keys.run(run_id)
        names: Any = await self.redis.hkeys(key)
        gate_fields = [_text(n) for n in names if _text(n).startswith(rr.GATE)]
        values: Any = await self.redis.hmget(key, [rr.REQUESTER, *gate_fields])
        if values and values[0]:
            people.add(_text(values[0]))
        for raw in values[1:]:
            try:
                gate = CallGate.model_validate_json(raw)
            except (ValidationError, TypeError):
                continue
            people.update(gate.users)
            for group in gate.groups:
                try:
                    people.update(await self.directory.members(group))
                except DirectoryUnavailable:
                    continue
        return people


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
