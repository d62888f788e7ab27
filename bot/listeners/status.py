"""`/agent status`: this channel's live runs (or one), answered privately within Slack's 3 s."""

from __future__ import annotations

from dataclasses import dataclass

from redis.exceptions import RedisError

from bot.slack.links import ThreadLinks
from bot.words import overviews as messages
from runtime.runs import LiveRuns

SHOWN = 25
"""Runs listed in one answer; the rest are counted."""


@dataclass(kw_only=True)
class RunStatus:
    live: LiveRuns
    links: ThreadLinks

    async def answer(self, channel: str, user_id: str, run_id: str = "") -> str:
        """The live runs of `channel`; with `run_id`, that run if it is live here (or is the
        asker's own, wherever it runs)."""
        try:
            if run_id:
                run = await self.live.one(run_id)
                if run is None or (run.channel != channel and run.requester != user_id):
                    return messages.status_no_run(run_id)
                runs = [run]
            else:
                runs = await self.live.in_channel(channel)
        except RedisError:
            return messages.STATUS_UNAVAILABLE
        lines = [
            messages.run_line(run, await self.links.thread(run.channel, run.thread))
            for run in runs[:SHOWN]
        ]
        return messages.status_listing(lines, len(runs))
