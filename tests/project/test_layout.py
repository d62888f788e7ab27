"""The architecture holds: the runtime knows nothing of Slack; entry points only wire."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    """A wheel (a library user installs one) holds only the package data named in
    `pyproject.toml`."""
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = data["package-data"]
    left_out = [
        str(path.relative_to(ROOT))
        for path in lua_files()
        if "lua/*.lua" not in shipped.get(".".join(path.parent.parent.relative_to(ROOT).parts), [])
    ]
    assert left_out == []


def import_graph() -> dict[str, set[str]]:
    """Module → the modules of `bot` and `runtime` it imports, `TYPE_CHECKING` imports included
    (a cycle through them is still a cycle in the design, only hidden from the interpreter)."""
    modules = {
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): path
        for package in ("bot", "runtime")
        for path in (ROOT / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                # `from runtime.db import keys` imports the module `runtime.db.keys`.
                targets.update(
                    f"{node.module}.{alias.name}"
                    if f"{node.module}.{alias.name}" in modules
                    else node.module
                    for alias in node.names
                )
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph[node])
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The groups of modules that import one another, each group once."""
    reach = {node: reachable(graph, node) for node in graph}
    cycles = {
        frozenset({node} | {other for other in reach[node] if node in reach[other]})
        for node in graph
        if node in reach[node]
    }
    return [set(cycle) for cycle in cycles]


def test_the_settings_and_the_keys_are_in_no_import_cycle() -> None:
    """Settings are read once, into one object, from modules that import nothing back."""
    graph = import_graph()
    assert {"runtime.settings", "runtime.db.keys", "bot.settings"} <= graph.keys()
    caught = [
        sorted(cycle)
        for cycle in import_cycles(graph)
        if cycle & {"runtime.settings", "runtime.db.keys", "bot.settings"}
    ]
    assert caught == []


def test_the_web_and_the_worker_do_not_load_the_console() -> None:
    """The console (no login, a stand-in Slack) is loaded only by `CONSOLE=true` and the demo."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, bot.__main__, bot.web.app, bot.worker; "
            "print(sorted(m for m in sys.modules if m.startswith('bot.console')))",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "[]"


def test_bot_reaches_runtimes_packages_through_their_faces() -> None:
    """`bot` names what it uses from `runtime.<package>`, never the module inside that holds it,
    so a package may move its modules about without touching the Slack side."""
    inside = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "bot").rglob("*.py")
        for name in imported_modules(path)
        if name.startswith("runtime.") and name.count(".") >= 2
    }
    assert sorted(inside) == []


def test_no_face_exports_a_name_its_package_has_a_module_of() -> None:
    """Once such a module is imported it is the package's attribute, and `from runtime.db import
    x` would hand out the module instead of the name the face promises."""
    clashes = {}
    for init in (ROOT / "runtime").glob("*/__init__.py"):
        exported = set()
        for node in ast.walk(ast.parse(init.read_text())):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                exported = set(ast.literal_eval(node.value))
        modules = {path.stem for path in init.parent.glob("*.py")}
        if exported & modules:
            clashes[init.parent.name] = sorted(exported & modules)
    assert clashes == {}


def test_no_module_imports_itself_back() -> None:
    """No two modules import each other, however far round, `TYPE_CHECKING` imports included."""
    assert [sorted(cycle) for cycle in import_cycles(import_graph())] == []


def test_tests_mirror_the_packages() -> None:
    """A package's tests sit in `tests/<runtime|bot>/<package>/`, so `pytest tests/runtime/grants`
    runs one package's tests; only the end-to-end conversations stay at the top, and the shared
    fixtures are in `tests/support/`."""
    tests = ROOT / "tests"
    top = sorted(p.name for p in tests.glob("test_*.py"))
    assert len(top) <= 6, f"tests at the top of tests/: {top}"
    for side in ("runtime", "bot"):
        for folder in (tests / side).iterdir():
            if not folder.is_dir() or folder.name == "__pycache__":
                continue
            package = ROOT / side / folder.name
            assert (package / "__init__.py").exists(), f"tests/{side}/{folder.name}: no package"
    helpers = sorted(p.name for p in tests.glob("*.py") if not p.name.startswith("test_"))
    assert helpers == ["__init__.py", "conftest.py"], f"helpers outside tests/support/: {helpers}"
