"""Model turns: a retried job gets the model's journaled response back, not a new one.

The tool journal (`runtime.journal.invoker`) keys outcomes by the SDK's call id, and the model
picks the ids. A job retried after a tool ran (the model answered 5xx past its retries, the
worker was killed, the job timed out) starts again from the state saved before the round, and
a model asked again answers with new ids: a call approved without a card in that round (by
Approve always, a grant, an automatic rule, or a tool that needs no approval) would run twice.

So each model response that asked for tool calls is journaled before anything acts on it: with
the start mark of the first of its tools that runs (`runtime.record.starts`), or before a grant,
an Approve always or an automatic rule decides one of its calls (`CallPlanner.plan`); a stop for
approvals needs neither (the saved state holds it). A retry of the same round replays it instead
of asking the model: the same call ids come back, and with them the journal's recorded
outcomes. A response that was not journaled was not acted on (no tool saw it, no call of it was
decided), so asking again is then safe. A final answer is not journaled: the
run ends on it, or (inside an agent used as a tool) the tool's output is.

A response is replayed only for the same request. Its key is a digest of the round, of the
calls of agents used as tools the request was made inside (`inside_call`: concurrent inner runs
never share a key), and of what the model was asked: instructions, input items, tools,
hand-offs, output schema and server-side conversation. The n-th identical request of a delivery
gets the n-th response; instructions that change between attempts (a clock in them) make the
model be asked again.

Field `turn:<round>:<request>` of the run's hash (`runtime.record.layout.TURN`), written fenced
(a delivery that lost its run writes nothing, and stops); the stop for approvals drops the
round's turns (the saved state holds them), and the rest go with the run. A journaled turn
costs its output items' JSON and a 39-byte field name: one function call with short arguments is
~280 bytes of JSON, ~400 bytes of Redis memory (`MEMORY USAGE`), more with reasoning items; only
a working run carries them, and a waiting one none.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
from agents.items import ModelResponse, TResponseOutputItem
from agents.usage import Usage
from openai.types.responses import ResponseOutputItem
from pydantic import BaseModel, TypeAdapter

from runtime.db.keys import Keys
from runtime.record import layout as rr
from runtime.record import scripts as rs
from runtime.record.reads import TurnRead
from runtime.record.view import read

TURN_VERSION = 1
KEY_HEX_DIGITS = 32
"""Of the request's SHA-256 in the field name: 128 bits, far from any collision in one run."""

_OUTPUT_ITEM: TypeAdapter[TResponseOutputItem] = TypeAdapter(ResponseOutputItem)
_PATH: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "countersign_tool_call_path", default=()
)


class UnreadableTurn(Exception):
    """A journaled turn another version wrote: replaying it is not possible, asking again
    could run its calls twice."""


@contextlib.contextmanager
def inside_call(call_id: str) -> Iterator[None]:
    """Model requests made while this tool call runs (an agent tool's inner run) are keyed
    apart from those of any other call."""
    token = _PATH.set((*_PATH.get(), call_id))
    try:
        yield
    finally:
        _PATH.reset(token)


def inside_a_call() -> bool:
    """Whether this runs inside a tool call (an agent tool's inner run)."""
    return bool(_PATH.get())


@dataclass(frozen=True, kw_only=True, slots=True)
class Request:
    """What the model is asked (`agents.models.interface.Model.get_response`'s arguments)."""

    instructions: str | None
    input: str | Sequence[Any]
    tools: Sequence[str]
    handoffs: Sequence[str]
    output_schema: str | None
    previous_response_id: str | None
    conversation_id: str | None
    prompt: Mapping[str, Any] | None

    def digest(self, round_: int) -> str:
        content = {
            "round": round_,
            "inside": list(_PATH.get()),
            "instructions": self.instructions,
            "input": _plain(self.input),
            "tools": list(self.tools),
            "handoffs": list(self.handoffs),
            "output_schema": self.output_schema,
            "previous_response_id": self.previous_response_id,
            "conversation_id": self.conversation_id,
            "prompt": _plain(self.prompt),
        }
        canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_HEX_DIGITS]


def _plain(value: Any) -> Any:
    """`value` as JSON data that does not depend on how the SDK holds an item: a fresh item is
    a pydantic model, a restored one a dict, and either may leave out what is unset."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(kw_only=True, slots=True)
class TurnsAsked:
    """One delivery's requests, by digest: the n-th identical request is keyed n. A request
    that failed gives its number back, so the SDK's own retries of it keep the key."""

    taken: dict[str, set[int]] = field(default_factory=dict)
    written: set[str] = field(default_factory=set)
    """The keys (`turn_key`) this delivery journaled."""
    pending: dict[str, str] = field(default_factory=dict)
    """Key -> a response (`dump_turn`) not journaled yet: nothing has acted on it (see the
    module docstring), and it is written with the first write that comes before anything does."""

    def journaled(self, entries: Mapping[str, str]) -> None:
        """`entries` (of `pending`) were written."""
        for key in entries:
            self.pending.pop(key, None)
            self.written.add(key)

    def take(self, digest: str) -> int:
        taken = self.taken.setdefault(digest, set())
        number = next(n for n in range(len(taken) + 1) if n not in taken)
        taken.add(number)
        return number

    def give_back(self, digest: str, number: int) -> None:
        self.taken.get(digest, set()).discard(number)


def turn_key(round_: int, digest: str, number: int) -> str:
    """The field's suffix: `<round>:<request>`, the n-th identical request's own from n=1."""
    if number == 0:
        return f"{round_}:{digest}"
    return f"{round_}:{hashlib.sha256(f'{digest}:{number}'.encode()).hexdigest()[:KEY_HEX_DIGITS]}"


def asks_for_tools(response: ModelResponse) -> bool:
    """Whether acting on the response runs something: a call of a tool of ours or a hand-off
    (each has a call id), or a hosted MCP server's request for approval."""
    return any(
        getattr(item, "call_id", None) or getattr(item, "type", None) == "mcp_approval_request"
        for item in response.output
    )


def dump_turn(response: ModelResponse) -> str:
    items = [
        item.model_dump(mode="json", exclude_unset=True) if isinstance(item, BaseModel) else item
        for item in response.output
    ]
    entry = {
        "v": TURN_VERSION,
        "output": items,
        "response_id": response.response_id,
        "request_id": response.request_id,
    }
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)


def load_turn(raw: bytes) -> ModelResponse:
    """The journaled response, its items as the model's client parses them; no tokens spent."""
    try:
        entry = json.loads(raw)
        if entry.get("v") != TURN_VERSION:
            raise UnreadableTurn(f"a model turn of version {entry.get('v')!r}")
        output = [_OUTPUT_ITEM.validate_python(item) for item in entry["output"]]
    except (ValueError, KeyError, AttributeError) as error:
        raise UnreadableTurn(f"a model turn that cannot be read ({error})") from error
    return ModelResponse(
        output=output,
        usage=Usage(),
        response_id=entry.get("response_id"),
        request_id=entry.get("request_id"),
    )


class TurnJournal:
    """The journaled model turns of runs, in their hashes."""

    def __init__(self, redis: aioredis.Redis, keys: Keys) -> None:
        self._redis = redis
        self._keys = keys
        self._set = rs.run_once(redis, rs.FENCED_WRITE, keeps=False)

    async def recorded(self, run_id: str, key: str) -> bytes | None:
        return (await read(self._redis, self._keys, TurnRead, run_id, key)).response

    async def record(self, run_id: str, fence: int, entries: Mapping[str, str]) -> bool:
        """Journal responses (key -> `dump_turn`); False if this delivery lost the run (or the
        run is gone): then none of their calls may run."""
        written = await self._set(
            rs.FencedSet(
                run=self._keys.run(run_id),
                audit=self._keys.shard_of(run_id).audit,
                fence=str(fence),
                entry="",
                fields=turn_fields(entries),
            )
        )
        return int(written) == 1


def turn_fields(entries: Mapping[str, str]) -> list[str]:
    """`entries` (key -> `dump_turn`) as fields of the run's hash: field, value, ..."""
    return [part for key, entry in entries.items() for part in (rr.TURN + key, entry)]
