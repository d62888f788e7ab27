"""The MCP tools each agent offers, as the worker last listed them, for the web process.

The web process never connects to MCP servers, yet `/agent help` names every agent's MCP tools
and their server. Each worker publishes an agent's listing here whenever all of that agent's
servers are connected (at start and after every reconnect); the web reads it. A listing is
what the worker saw with an empty run context: a tool filter that depends on the run may
offer a run fewer tools.
"""

from __future__ import annotations

import time
from typing import Any

import redis.asyncio as aioredis
from pydantic import BaseModel, ConfigDict, ValidationError

from runtime.db.keys import Keys

LISTING_TTL_SECONDS = 30 * 86400
DESCRIPTION_CHARS = 300


class McpToolInfo(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    tool: str
    """The name the model calls it by."""
    server: str
    description: str = ""


class McpToolListing(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    agent: str
    tools: tuple[McpToolInfo, ...]
    listed_at: float


class McpListings:
    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys

    async def publish(self, agent: str, tools: list[McpToolInfo]) -> None:
        shortened = [
            info.model_copy(update={"description": info.description[:DESCRIPTION_CHARS]})
            for info in tools
        ]
        listing = McpToolListing(agent=agent, tools=tuple(shortened), listed_at=time.time())
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(self._keys.mcp_tools, agent, listing.model_dump_json())
            pipe.expire(self._keys.mcp_tools, LISTING_TTL_SECONDS)
            await pipe.execute()

    async def read(self) -> dict[str, McpToolListing]:
        """Agent name -> its published listing; listings this version cannot read are left out."""
        raw: Any = await self._redis.hgetall(self._keys.mcp_tools)
        found = {}
        for name, value in raw.items():
            try:
                found[name.decode()] = McpToolListing.model_validate_json(value)
            except ValidationError:
                continue
        return found
