"""Reading the run record: every reader of `run:<id>` asks for a typed view of it here.

A view is a class of the fields one reader needs (`runtime.record.reads` has them all), each
declared once with how it is parsed: `Field` (one field; None when absent), `Present` (whether
it is there) and `Every` (one per-call field for every call, from the whole hash). `read` builds
the field list from the class and sends one `HMGET` (an `HGET` for one field, as readers did by
hand before), `queue` adds the same to a pipeline and `of_queued` parses its reply, and
`read_whole` sends one `HGETALL`. So a read costs what it did, and a field's name and parsing
live in one place.

Fields are parsed when first asked for, not when read: a reader that does not look at a field
another version wrote (an envelope it cannot read, a newer edit) is not stopped by it. A
field whose name ends in `:` is per call (`runtime.record.layout.PER_CALL`, `JOURNAL`,
`STARTED`): a view of one call reads it for the `call` given to `read`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

from runtime.record.envelope import RunEnvelope, UnreadableEnvelope, parse_envelope

if TYPE_CHECKING:
    import redis.asyncio as aioredis
    from redis.asyncio.client import Pipeline

    from runtime.db.keys import Keys

T = TypeVar("T")
S = TypeVar("S", bound="Shape")


class Shape:
    """One reader's view of one run's record (and, for per-call fields, of one call)."""

    __slots__ = ("_parsed", "_raw", "call", "run_id")

    def __init__(self, run_id: str, raw: Mapping[str, bytes], call: str = "") -> None:
        self.run_id = run_id
        self.call = call
        """The approval id (or SDK call id) the per-call fields were read for."""
        self._raw = raw
        self._parsed: dict[str, Any] = {}

    @classmethod
    def names(cls, call: str = "") -> list[str]:
        """The fields to ask for, once each, in declaration order."""
        names: list[str] = []
        for kind in reversed(cls.__mro__):
            for value in vars(kind).values():
                if isinstance(value, Every):
                    raise TypeError(f"{cls.__name__} reads every call: read it whole")
                if isinstance(value, _Declared) and (name := value.of(call)) not in names:
                    names.append(name)
        return names

    @classmethod
    def of_reply(cls, run_id: str, reply: Sequence[Any], call: str = "") -> Self:
        """The view from the reply to `names(call)` (an `HMGET`'s, or an `HGET`'s as a list)."""
        names = cls.names(call)
        raw = {n: v for n, v in zip(names, reply, strict=True) if v is not None}
        return cls(run_id, raw, call)

    @classmethod
    def of_whole(cls, run_id: str, reply: Mapping[Any, Any]) -> Self:
        """The view from an `HGETALL`'s reply."""
        raw = {(n.decode() if isinstance(n, bytes) else n): v for n, v in reply.items()}
        return cls(run_id, raw)

    def raw(self, name: str) -> bytes | None:
        return self._raw.get(name)

    def every(self, prefix: str) -> dict[str, bytes]:
        """Each value of a per-call field, by the id it is for."""
        return {n.removeprefix(prefix): v for n, v in self._raw.items() if n.startswith(prefix)}

    def parsed(self, attribute: str, parse: Callable[[], T]) -> T:
        if attribute not in self._parsed:
            self._parsed[attribute] = parse()
        value: T = self._parsed[attribute]
        return value


class _Declared:
    def __init__(self, name: str) -> None:
        self.name = name
        self.attribute = name

    def __set_name__(self, owner: type, attribute: str) -> None:
        self.attribute = attribute

    def of(self, call: str) -> str:
        return self.name + call if self.name.endswith(":") else self.name


class Field(_Declared, Generic[T]):
    """One field, parsed by `parse` (None when it is absent)."""

    def __init__(self, name: str, parse: Callable[[bytes], T]) -> None:
        super().__init__(name)
        self.parse = parse

    @overload
    def __get__(self, view: None, owner: type) -> Field[T]: ...
    @overload
    def __get__(self, view: Shape, owner: type) -> T | None: ...
    def __get__(self, view: Shape | None, owner: type) -> Field[T] | T | None:
        if view is None:
            return self
        raw = view.raw(self.of(view.call))
        return None if raw is None else view.parsed(self.attribute, lambda: self.parse(raw))


class Present(_Declared):
    """Whether a field is there, whatever it holds."""

    @overload
    def __get__(self, view: None, owner: type) -> Present: ...
    @overload
    def __get__(self, view: Shape, owner: type) -> bool: ...
    def __get__(self, view: Shape | None, owner: type) -> Present | bool:
        if view is None:
            return self
        return view.raw(self.of(view.call)) is not None


class Every(_Declared, Generic[T]):
    """A per-call field for every call that has it (read whole), by id; a value `parse` turns
    into None is left out."""

    def __init__(self, name: str, parse: Callable[[bytes], T | None]) -> None:
        super().__init__(name)
        self.parse = parse

    @overload
    def __get__(self, view: None, owner: type) -> Every[T]: ...
    @overload
    def __get__(self, view: Shape, owner: type) -> dict[str, T]: ...
    def __get__(self, view: Shape | None, owner: type) -> Every[T] | dict[str, T]:
        if view is None:
            return self
        return view.parsed(self.attribute, lambda: self._all(view))

    def _all(self, view: Shape) -> dict[str, T]:
        found = {key: self.parse(raw) for key, raw in view.every(self.name).items()}
        return {key: value for key, value in found.items() if value is not None}


class Envelope(_Declared):
    """The versioned envelope: `UnreadableEnvelope` (raised) when this version cannot read it,
    or with `readable`, None then."""

    def __init__(self, name: str, *, readable: bool = False) -> None:
        super().__init__(name)
        self.readable = readable

    @overload
    def __get__(self, view: None, owner: type) -> Envelope: ...
    @overload
    def __get__(self, view: Shape, owner: type) -> RunEnvelope | None: ...
    def __get__(self, view: Shape | None, owner: type) -> Envelope | RunEnvelope | None:
        if view is None:
            return self
        raw = view.raw(self.of(view.call))
        if raw is None:
            return None
        try:
            return view.parsed(self.attribute, lambda: parse_envelope(view.run_id, raw))
        except UnreadableEnvelope:
            if self.readable:
                return None
            raise


async def read(redis: aioredis.Redis, keys: Keys, shape: type[S], run_id: str, call: str = "") -> S:
    """`shape` of the run `run_id` (and of its call `call`), in one command."""
    names = shape.names(call)
    if len(names) == 1:
        return shape.of_reply(run_id, [await redis.hget(keys.run(run_id), names[0])], call)
    reply: Any = await redis.hmget(keys.run(run_id), names)
    return shape.of_reply(run_id, reply, call)


def queue(pipe: Pipeline, keys: Keys, shape: type[Shape], run_id: str, call: str = "") -> None:
    """Add `read`'s command to `pipe`; `of_queued` parses its reply."""
    names = shape.names(call)
    if len(names) == 1:
        pipe.hget(keys.run(run_id), names[0])
    else:
        pipe.hmget(keys.run(run_id), names)


def of_queued(shape: type[S], run_id: str, reply: Any, call: str = "") -> S:
    """The view from the reply to `queue`'s command."""
    return shape.of_reply(run_id, reply if isinstance(reply, list) else [reply], call)


async def read_whole(redis: aioredis.Redis, keys: Keys, shape: type[S], run_id: str) -> S:
    """`shape` of the run `run_id` from its whole hash (one `HGETALL`)."""
    reply: Any = await redis.hgetall(keys.run(run_id))
    return shape.of_whole(run_id, reply)
