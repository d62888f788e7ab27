"""`/agent stats [days]`: how decisions went in the channel, read from the audit trail
(`runtime.review.stats`) and answered within Slack's 3 seconds, or told why not."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass

from redis.exceptions import RedisError

from bot.words import stats as stats_words
from runtime.audit import AuditTrail
from runtime.review import decision_stats

log = logging.getLogger(__name__)

READ_SECONDS = 2.0
"""How long the trail may be read before the answer says it is too long (Slack's 3 s less the
rest of the request)."""


@dataclass(kw_only=True)
class ChannelStatsAnswer:
    audit: AuditTrail
    quick_approval_seconds: float

    async def answer(self, command: str, channel: str, days: int) -> str:
        since = dt.datetime.now(dt.UTC) - dt.timedelta(days=days)
        try:
            async with asyncio.timeout(READ_SECONDS):
                found = await decision_stats(
                    self.audit.since(since),
                    quick_seconds=self.quick_approval_seconds,
                    channel=channel,
                )
        except TimeoutError:
            log.info("stats of %s over %d days: too long a trail to read in time", channel, days)
            return stats_words.stats_too_long(days, command)
        except RedisError:
            log.warning("stats of %s not read: Redis unreachable", channel)
            return stats_words.STATS_UNAVAILABLE
        return stats_words.stats_answer(found.get(channel), days, self.quick_approval_seconds)
