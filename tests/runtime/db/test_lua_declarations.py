"""Every Lua script's declaration (`runtime.db.lua.declare`) agrees with the script: the names
its header gives KEYS and ARGV, in order, and the `KEYS[n]`/`ARGV[n]` its code reads. A key or
an argument added on one side only fails here, before a caller sends it by the wrong position."""

from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import pytest

from runtime.db.lua import Key, MoreArgs, Script, ScriptCall, declare
from runtime.record import scripts as record_scripts

FRAMES = {("runtime.record", "once"), ("runtime.record", "once_in_run")}
"""Not scripts: the frame `runtime.record.once` puts around one (its token key and TTL come
after the script's own), and the head of those that keep their reply in the run's hash (its
token comes after the script's own arguments)."""

_SECTION = re.compile(r"^-- (KEYS|ARGV)(?: \(.*\))?$")
_ENTRY = re.compile(r"^--   (\d+)(\.\.\.)? ([a-z_]+): ")
_USE = re.compile(r"\b(KEYS|ARGV)\[(\d+)\]")


def every_script() -> dict[str, Script[Any]]:
    """`module.NAME` -> each declared script of `runtime` and `bot`."""
    found: dict[str, Script[Any]] = {}
    for package in ("runtime", "bot"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            if info.name.endswith("__main__"):
                continue
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional module (playwright, ...)
                continue
            for name, value in vars(module).items():
                if isinstance(value, Script) and value.call.__module__ == info.name:
                    found[f"{info.name}.{name}"] = value
    return found


def fragment(package: str, name: str) -> list[str]:
    return files(package).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8").splitlines()


@dataclass(frozen=True)
class Header:
    """What a script's header lists: names in order, and the name of a variable tail."""

    keys: tuple[str, ...]
    more_keys: str | None
    args: tuple[str, ...]
    more_args: str | None


def header(lines: list[str]) -> Header | None:
    """The `-- KEYS` and `-- ARGV` sections of a fragment; None if it has none of its own."""
    found: dict[str, list[str]] = {"KEYS": [], "ARGV": []}
    more: dict[str, str | None] = {"KEYS": None, "ARGV": None}
    section = None
    sections = 0
    for line in lines:
        if heading := _SECTION.match(line):
            section = heading.group(1)
            sections += 1
            continue
        if section is None or not line.startswith("--   "):
            section = None
            continue
        if entry := _ENTRY.match(line):
            number, tail, name = int(entry.group(1)), entry.group(2), entry.group(3)
            assert more[section] is None, f"{section} {number} after the tail"
            assert number == len(found[section]) + 1, f"{section} {number} out of order"
            if tail:
                more[section] = name
            else:
                found[section].append(name)
    if not sections:
        return None
    return Header(tuple(found["KEYS"]), more["KEYS"], tuple(found["ARGV"]), more["ARGV"])


def code(lines: list[str]) -> str:
    return "\n".join(line.split("--", 1)[0] for line in lines)


def disagreements(script: Script[Any]) -> list[str]:
    """How `script`'s declaration and its Lua differ (nothing when they agree)."""
    package, contract = script.contract
    declared = script.call.parameters()
    lines = fragment(package, contract)
    listed = header(lines)
    if listed is None:
        return [f"{contract}.lua lists no KEYS and ARGV"]
    problems = []
    for what, mine, theirs in (
        ("KEYS", declared.keys, listed.keys),
        ("the rest of KEYS", declared.more_keys, listed.more_keys),
        ("ARGV", declared.args, listed.args),
        ("the rest of ARGV", declared.more_args, listed.more_args),
    ):
        if mine != theirs:
            problems.append(f"{what}: declared {mine}, the header says {theirs}")
    # The code that reads this script's KEYS and ARGV: the contract's fragment and the ones
    # after it that have no contract of their own (the rest of a batch's body).
    body = code(lines) + "\n" + "\n".join(code(other) for other in _following(script))
    used: dict[str, set[int]] = {"KEYS": set(), "ARGV": set()}
    for kind, number in _USE.findall(body):
        used[kind].add(int(number))
    for kind, fixed, tail in (
        ("KEYS", len(declared.keys), declared.more_keys),
        ("ARGV", len(declared.args), declared.more_args),
    ):
        wholesale = kind == "KEYS" and re.search(r"\(KEYS,", body)
        most = max(used[kind], default=0)
        if tail is None and most != fixed and not (wholesale and most < fixed):
            problems.append(f"{kind}: declared {fixed}, the code reads up to {kind}[{most}]")
        if tail is not None and kind == "ARGV":
            start = fixed + 1
            if not re.search(rf"unpack\(ARGV, {start}\)|= {start}, #ARGV", body):
                problems.append(f"ARGV: the code reads no tail from ARGV[{start}]")
            if most > fixed:
                problems.append(f"ARGV: declared {fixed} before the tail, code reads ARGV[{most}]")
    return problems


def _following(script: Script[Any]) -> list[list[str]]:
    package, contract = script.contract
    order = _fragments(script)
    after = order[order.index(contract) + 1 :] if contract in order else []
    return [lines for name in after if header(lines := fragment(package, name)) is None]


def _fragments(script: Script[Any]) -> list[str]:
    """The fragments of `runtime/<package>/lua/` the source was made of, in order."""
    package, _ = script.contract
    folder = files(package).joinpath("lua")
    texts = {
        entry.name.removesuffix(".lua"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".lua")
    }
    placed = sorted(
        (script.source.find(text), name) for name, text in texts.items() if text in script.source
    )
    return [name for _, name in placed]


SCRIPTS = every_script()


def test_every_lua_file_with_keys_and_argv_is_declared() -> None:
    contracts = {script.contract for script in SCRIPTS.values()}
    listed = set()
    for package in _lua_packages():
        for entry in files(package).joinpath("lua").iterdir():
            name = entry.name.removesuffix(".lua")
            if entry.name.endswith(".lua") and header(fragment(package, name)) is not None:
                listed.add((package, name))
    assert listed - FRAMES == contracts


def _lua_packages() -> set[str]:
    return {script.contract[0] for script in SCRIPTS.values()} | {p for p, _ in FRAMES}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_declaration_agrees_with_its_script(name: str) -> None:
    assert disagreements(SCRIPTS[name]) == []


def test_the_record_scripts_are_all_found() -> None:
    assert {s.contract[1] for s in SCRIPTS.values() if s.contract[0] == "runtime.record"} == {
        script.contract[1] for script in vars(record_scripts).values() if isinstance(script, Script)
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class _OneArgumentShort(ScriptCall):
    run: Key
    audit: Key
    fence: str
    fields: MoreArgs


@dataclass(frozen=True, slots=True, kw_only=True)
class _OneArgumentMore(ScriptCall):
    run: Key
    audit: Key
    fence: str
    entry: str
    writer: str
    fields: MoreArgs


@dataclass(frozen=True, slots=True, kw_only=True)
class _OneKeyMore(ScriptCall):
    run: Key
    audit: Key
    stream: Key
    approval_id: str
    copies: str


@dataclass(frozen=True, slots=True, kw_only=True)
class _Renamed(ScriptCall):
    run: Key
    stream: Key
    kind: str
    round: int
    ttl_seconds: int
    run_id: str
    event: str
    fence_step: int


@pytest.mark.parametrize(
    ("call", "fragments", "expected"),
    [
        (_OneArgumentShort, ("fenced_set",), "ARGV: declared ('fence',), the header says"),
        (_OneArgumentMore, ("fenced_set",), "ARGV: declared ('fence', 'entry', 'writer')"),
        (_OneKeyMore, ("home_index", "add_copies"), "KEYS: declared 3, the code reads up to"),
        (_Renamed, ("home_index", "claim"), "KEYS: declared ('run', 'stream')"),
    ],
    ids=["an argument short", "an argument more", "a key more", "a key renamed"],
)
def test_a_declaration_that_disagrees_with_its_script_fails(
    call: type[ScriptCall], fragments: tuple[str, ...], expected: str
) -> None:
    wrong = declare(call, "runtime.record", *fragments, constants=record_scripts.LUA_CONSTANTS)
    assert any(problem.startswith(expected) for problem in disagreements(wrong)), disagreements(
        wrong
    )


def test_a_call_is_sent_as_its_script_lists_it() -> None:
    call = record_scripts.FencedSet(
        run="run:r1", audit="audit", fence="7", entry="", fields=["status", "waiting"]
    )
    assert (call.keys(), call.args()) == (["run:r1", "audit"], ["7", "", "status", "waiting"])


def test_keys_come_before_arguments_in_a_declaration() -> None:
    @dataclass(frozen=True, slots=True, kw_only=True)
    class Misordered(ScriptCall):
        fence: str
        run: Key

    with pytest.raises(TypeError, match="keys first"):
        Misordered.parameters()
