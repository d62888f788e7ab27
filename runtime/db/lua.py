"""Lua scripts as `.lua` files: each in the `lua/` folder of the package whose module runs it,
shipped as package data (`pyproject.toml`) and read once, when that module is imported.

Each file begins with its contract: every key and every argument, in order, and what it means.

A script is one file, or fragments concatenated in the order named: the decision script is the
functions of `runtime/record/lua/choices.lua`, then `decide.lua`, which calls them. Before the
first fragment come the `constants` the caller passes, as Lua locals: a name Python also uses
(the run hash's fields, an audit event, the job group) is spelled once, in Python, and the
`.lua` files use it by its local's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources import files
from typing import TypeAlias

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
