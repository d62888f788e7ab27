"""The architecture holds: the runtime knows nothing of Slack; entry points only wire."""

from __future__ import annotations

import ast
import itertools
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_runtime_imports_nothing_from_bot_or_slack() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            name
            for name in imported_modules(path)
            if name.split(".")[0] in {"bot", "slack_sdk", "slack_bolt"}
        )
        for path in (ROOT / "runtime").rglob("*.py")
    }
    assert {path: names for path, names in offenders.items() if names} == {}


def test_modules_stay_small() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in ("bot", "runtime")
        for path in (ROOT / package).rglob("*.py")
    }
    assert {path: lines for path, lines in sizes.items() if lines > 400} == {}


def test_no_module_is_named_for_nothing_in_particular() -> None:
    vague = {"utils.py", "helpers.py", "manager.py", "misc.py", "common.py"}
    assert [
        p
        for package in ("bot", "runtime")
        for p in (ROOT / package).rglob("*.py")
        if p.name in vague
    ] == []


def test_procfile_runs_web_and_worker_through_the_entry_point() -> None:
    lines = (ROOT / "Procfile").read_text().splitlines()
    assert lines == ["web: python -m bot web", "worker: python -m bot worker"]


def test_each_package_keeps_a_short_top_level() -> None:
    """Past a dozen modules a flat folder hides the architecture: concepts live in subpackages."""
    tops = {
        package: sorted(p.name for p in (ROOT / package).glob("*.py") if p.name != "__init__.py")
        for package in ("bot", "runtime")
    }
    assert {package: names for package, names in tops.items() if len(names) > 12} == {}


def test_every_subpackage_says_what_it_owns() -> None:
    silent = [
        str(init.relative_to(ROOT))
        for package in ("bot", "runtime")
        for init in (ROOT / package).rglob("__init__.py")
        if init.parent != ROOT / package and not ast.get_docstring(ast.parse(init.read_text()))
    ]
    assert silent == []


def test_no_python_string_holds_lua() -> None:
    """Every script is a `.lua` file of the package that runs it (`runtime.db.lua`)."""
    holding = [
        str(path.relative_to(ROOT))
        for package in ("bot", "runtime")
        for path in (ROOT / package).rglob("*.py")
        if "redis.call" in path.read_text()
    ]
    assert holding == []


def lua_files() -> list[Path]:
    return sorted(p for package in ("bot", "runtime") for p in (ROOT / package).rglob("*.lua"))


def test_each_lua_file_opens_with_its_keys_and_arguments() -> None:
    assert lua_files()
    silent = []
    for path in lua_files():
        lines = path.read_text().splitlines()
        opening = "\n".join(itertools.takewhile(lambda line: line.startswith("--"), lines))
        if "KEYS" not in opening or "ARGV" not in opening:
            silent.append(str(path.relative_to(ROOT)))
    assert silent == []


def test_every_lua_file_ships_with_its_package() -> None:
    """A wheel (Heroku installs one) holds only the package data named in `pyproject.toml`."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = data["package-data"]
    left_out = [
        str(path.relative_to(ROOT))
        for path in lua_files()
        if "lua/*.lua" not in shipped.get(".".join(path.parent.parent.relative_to(ROOT).parts), [])
    ]
    assert left_out == []
