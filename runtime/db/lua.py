"""Lua scripts as `.lua` files: each in the `lua/` folder of the package whose module runs it,
shipped as package data (`pyproject.toml`) and read once, when that module is imported.

Each file begins with its contract: every key and every argument, in order, by name, and what
it means. Python declares the same once per script (`declare`): a `ScriptCall` dataclass whose
fields are those names, typed, so a caller passes named values and never builds KEYS or ARGV by
position; `tests/runtime/db/test_lua_declarations.py` holds every declaration against its script's
header
and its `KEYS[n]`/`ARGV[n]`.

A script is one file, or fragments concatenated in the order named: the decision script is the
functions of `runtime/record/lua/choices.lua`, then `decide.lua`, which calls them. Before the
first fragment come the `constants` the caller passes, as Lua locals: a name Python also uses
(the run hash's fields, an audit event, the job group) is spelled once, in Python, and the
`.lua` files use it by its local's name.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from importlib.resources import files
from typing import Annotated, Any, Generic, TypeAlias, TypeVar, cast, get_type_hints

import redis.asyncio as aioredis

LuaConstant: TypeAlias = str | int | Mapping[str, str]
"""A string, a number, or a table of strings (`F.status`)."""


def lua_script(
    package: str, *fragments: str, constants: Mapping[str, LuaConstant] | None = None
) -> str:
    """The source of a script: `constants` as locals, then `package`'s `lua/<fragment>.lua`
    files in the order named."""
    return _locals(constants or {}) + "".join(lua_file(package, name) for name in fragments)


def lua_file(package: str, name: str) -> str:
    """The text of `package`'s `lua/<name>.lua`, as shipped (an editable install reads the
    working tree, a wheel its own copy)."""
    return files(package).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def _locals(constants: Mapping[str, LuaConstant]) -> str:
    return "".join(f"local {name} = {_literal(value)}\n" for name, value in constants.items())


def _literal(value: LuaConstant) -> str:
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        # Our names need no escapes; refuse rather than quote one wrongly into every script.
        if any(c in value for c in "'\\\n\r") or not value.isprintable():
            raise ValueError(f"{value!r} needs escaping as a Lua string; use a plainer name")
        return f"'{value}'"
    pairs = ", ".join(f"{key} = {_literal(item)}" for key, item in value.items())
    return f"{{{pairs}}}"


# --- Declarations: each script's keys and arguments, by name and type --------------------------

LuaArg: TypeAlias = str | int | float | bytes
"""What an argument may be: redis-py sends each as a string."""


class _Part(enum.Enum):
    KEY = "one of KEYS"
    MORE_KEYS = "the rest of KEYS"
    MORE_ARGS = "the rest of ARGV"


Key: TypeAlias = Annotated[str, _Part.KEY]
"""A field that is one of the script's KEYS (every other field is one of its ARGV)."""
MoreKeys: TypeAlias = Annotated[Sequence[str], _Part.MORE_KEYS]
"""The last of the KEYS fields: any number of keys (`6...` in the script's header)."""
MoreArgs: TypeAlias = Annotated[Sequence[LuaArg], _Part.MORE_ARGS]
"""The last field: any number of arguments (`3...` in the script's header)."""


@dataclass(frozen=True, slots=True)
class Parameters:
    """A declaration's KEYS and ARGV by name, in order; `more_*`: the variable tail's name."""

    keys: tuple[str, ...]
    more_keys: str | None
    args: tuple[str, ...]
    more_args: str | None


class ScriptCall:
    """The base of a script's declaration: a frozen, keyword-only dataclass whose fields name
    the script's KEYS (typed `Key`, and last perhaps `MoreKeys`), then its ARGV (every other
    field, and last perhaps `MoreArgs`), in the order and with the names of the script's header.
    A caller builds one with named values; `keys()` and `args()` are what redis-py sends.
    `tests/runtime/db/test_lua_declarations.py` holds each declaration against its script."""

    __slots__ = ()

    @classmethod
    def parameters(cls) -> Parameters:
        shape = _SHAPES.get(cls)
        if shape is None:
            shape = _SHAPES[cls] = _parameters(cls)
        return shape

    def keys(self) -> list[str]:
        shape = self.parameters()
        found = [getattr(self, name) for name in shape.keys]
        if shape.more_keys:
            found.extend(getattr(self, shape.more_keys))
        return found

    def args(self) -> list[LuaArg]:
        shape = self.parameters()
        found = [getattr(self, name) for name in shape.args]
        if shape.more_args:
            found.extend(getattr(self, shape.more_args))
        return found


_SHAPES: dict[type[ScriptCall], Parameters] = {}


def _parameters(cls: type[ScriptCall]) -> Parameters:
    hints = get_type_hints(cls, include_extras=True)
    keys: list[str] = []
    args: list[str] = []
    more: dict[_Part, str] = {}
    for spec in fields(cast(Any, cls)):
        parts = [m for m in getattr(hints[spec.name], "__metadata__", ()) if isinstance(m, _Part)]
        part = parts[0] if parts else None
        if more.get(_Part.MORE_ARGS) or (part in (_Part.KEY, _Part.MORE_KEYS) and (args or more)):
            raise TypeError(f"{cls.__name__}.{spec.name}: keys first, then arguments, tails last")
        if part is None:
            args.append(spec.name)
        elif part is _Part.KEY:
            keys.append(spec.name)
        else:
            more[part] = spec.name
    return Parameters(
        tuple(keys), more.get(_Part.MORE_KEYS), tuple(args), more.get(_Part.MORE_ARGS)
    )


C = TypeVar("C", bound=ScriptCall)


@dataclass(frozen=True, slots=True)
class Script(Generic[C]):
    """A script as sent to Redis, and its declaration (`call`)."""

    call: type[C]
    source: str
    contract: tuple[str, str]
    """The package and the fragment whose header lists the script's KEYS and ARGV."""


def declare(
    call: type[C],
    package: str,
    *fragments: str,
    contract: str | None = None,
    constants: Mapping[str, LuaConstant] | None = None,
    frame: Callable[[str], str] | None = None,
) -> Script[C]:
    """`lua_script(package, *fragments, constants=...)` with its declaration; `contract`: the
    fragment whose header lists KEYS and ARGV (the last one unless named); `frame`: what wraps
    the source before it is sent (`runtime.record.once.once_body`)."""
    source = lua_script(package, *fragments, constants=constants)
    return Script(call, frame(source) if frame else source, (package, contract or fragments[-1]))


class Registered(Generic[C]):
    """A script registered on a client: called with its declaration's values."""

    def __init__(self, redis: aioredis.Redis, script: Script[C]) -> None:
        self._script = redis.register_script(script.source)

    async def __call__(self, call: C) -> Any:
        return await self._script(keys=call.keys(), args=call.args())
