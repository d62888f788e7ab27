"""The README and docs/ stay true: the README opens with the two set-up commands and stays a
front door; every setting is documented; every path, module, link, command and flag they name
exists; and docs/architecture.md maps every package."""

from __future__ import annotations

import importlib
import importlib.util
import re
import tomllib
from pathlib import Path

from bot.listeners.commands import COMMANDS
from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PAGES = {
    path.relative_to(ROOT).as_posix(): path.read_text()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
}
ARCHITECTURE = PAGES["docs/architecture.md"]

REPO_DIRS = ("bot", "runtime", "tests", "bench", "scripts", "docs", ".ci")
"""A code span that starts with one of these names a path in the repository."""
OUR_MODULES = ("bot", "runtime", "bench", "tests")
READ_BY_THE_SDK = frozenset({"OPENAI_BASE_URL", "OPENAI_DEFAULT_MODEL"})
"""Variables the docs name that the `openai` client or the Agents SDK read, not our code."""


def code_spans(text: str) -> list[str]:
    """Inline code (`...`), and each line of fenced code blocks."""
    blocks = re.findall(r"^ *```[a-z]*\n(.*?)^ *```", text, re.DOTALL | re.MULTILINE)
    inline = re.sub(r"^ *```[a-z]*\n.*?^ *```", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.findall(r"`([^`\n]+)`", inline) + [
        line.strip() for block in blocks for line in block.splitlines()
    ]


def our_source() -> str:
    files = [p for d in (*OUR_MODULES, "scripts") for p in (ROOT / d).rglob("*.py")]
    return "\n".join(p.read_text() for p in files)


def test_the_readme_opens_with_the_two_setup_commands() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README, re.DOTALL)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block[1].splitlines()]
    assert commands == ["python3 scripts/dev.py demo", "python3 scripts/dev.py test"]
    assert "python3 scripts/dev.py test" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_stays_a_front_door() -> None:
    """What it is, the two commands, the console tour, Slack, links: the rest lives in docs/."""
    assert len(README.splitlines()) <= 250
    for page in PAGES:
        if page.startswith("docs/"):
            assert f"]({page})" in README, f"the README does not link {page}"


def test_every_setting_is_in_the_configuration_table() -> None:
    operations = PAGES["docs/operations.md"]
    table = operations.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    variables = {name.upper() for name in Settings.model_fields}
    assert {name for name in variables if f"`{name}`" not in table} == set()


def test_every_variable_named_exists() -> None:
    """A variable the docs name is a setting, read by our code, or read by the SDK."""
    variables = {name.upper() for name in Settings.model_fields}
    source = our_source()
    named = {
        (page, name)
        for page, text in PAGES.items()
        for span in code_spans(text)
        for name in re.findall(r"(?<![\w./-])([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b", span)
    }
    unknown = {
        (page, name)
        for page, name in named
        if name not in variables and name not in READ_BY_THE_SDK and name not in source
    }
    assert unknown == set()


def test_every_path_named_exists() -> None:
    missing = set()
    for page, text in PAGES.items():
        for span in code_spans(text):
            for path in re.findall(r"(?<![\w./-])((?:\.ci|[a-z]+)/[\w./-]*\w/?)", span):
                if path.split("/")[0] in REPO_DIRS and not (ROOT / path).exists():
                    missing.add((page, path))
            # A file at the top: `requirements.txt`, `slack-manifest.yml`.
            if re.fullmatch(r"[\w-]+\.(?:yml|txt|toml)", span) and not (ROOT / span).exists():
                missing.add((page, span))
    assert missing == set()


def test_every_module_named_exists() -> None:
    """`runtime.examples:AGENTS`, `bench.approval_loop`, `runtime.runs.executor`: importable."""
    missing = set()
    for page, text in PAGES.items():
        for span in code_spans(text):
            pattern = rf"(?<![\w/.])((?:{'|'.join(OUR_MODULES)})(?:\.\w+)+(?::\w+)?)\b"
            for dotted in re.findall(pattern, span):
                if not _resolves(dotted):
                    missing.add((page, dotted))
    assert missing == set()


def _resolves(dotted: str) -> bool:
    module, _, attribute = dotted.partition(":")
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        name = ".".join(parts[:cut])
        if importlib.util.find_spec(name) is not None:
            found: object = importlib.import_module(name)
            for attr in [*parts[cut:], *([attribute] if attribute else [])]:
                if not hasattr(found, attr):
                    return False
                found = getattr(found, attr)
            return True
    return False


def test_every_file_named_without_its_folder_exists_somewhere() -> None:
    names = {p.name for d in REPO_DIRS for p in (ROOT / d).rglob("*") if p.is_file()}
    loose = {
        (page, span)
        for page, text in PAGES.items()
        for span in code_spans(text)
        if re.fullmatch(r"\w+\.(?:py|lua)", span) and span not in names
    }
    assert loose == set()


def test_every_link_leads_somewhere() -> None:
    broken = set()
    for page, text in PAGES.items():
        here = (ROOT / page).parent
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (here / path).resolve() if path else ROOT / page
            if not file.exists() or (
                anchor and file.suffix == ".md" and anchor not in _anchors(file.read_text())
            ):
                broken.add((page, target))
    assert broken == set()


def _anchors(markdown: str) -> set[str]:
    """The ids GitHub gives a page's headings."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_command_named_runs_something_that_exists() -> None:
    """`python -m <ours> <process>` and `python3 scripts/<x>.py <command>`: the module exists,
    the process or command is one it offers, and every `--flag` is one it (or its package)
    defines."""
    command = r"python3? (?:-m ([\w.]+)|(scripts/\w+\.py))((?: +[^\s#>&;]+)*)"
    wrong = {
        (page, problem)
        for page, text in PAGES.items()
        for span in code_spans(text)
        for module, script, rest in re.findall(command, span)
        for problem in _command_problems(module or script, _command_source(module, script), rest)
    }
    assert wrong == set()


def _command_problems(target: str, source: str | None, rest: str) -> list[str]:
    if source is None:
        ours = target.split(".")[0] in (*OUR_MODULES, "scripts")
        return [f"{target}: no such module"] if ours else []
    args = rest.split()
    # `python -m bot web|worker|demo`: each process named must be one it offers.
    words = args[0].split("|") if args and re.fullmatch(r"[a-z|]+", args[0]) else []
    flags = [arg.split("=")[0] for arg in args if arg.startswith("--")]
    return [f"{target} {word}" for word in [*words, *flags] if f'"{word}"' not in source]


def test_every_marker_named_is_registered() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    markers = {m.split(":")[0] for m in pyproject["tool"]["pytest"]["ini_options"]["markers"]}
    named = {
        (page, marker)
        for page, text in PAGES.items()
        for marker in re.findall(r'-m "not (\w+)"', text)
    }
    assert {(page, marker) for page, marker in named if marker not in markers} == set()


def _command_source(module: str, script: str) -> str | None:
    """The text of what the command runs, with its package's other modules (shared flags)."""
    if script:
        path = ROOT / script
        return path.read_text() if path.is_file() else None
    if module.split(".")[0] not in OUR_MODULES:
        return None
    path = ROOT / module.replace(".", "/")
    main = path / "__main__.py" if path.is_dir() else path.with_suffix(".py")
    if not main.is_file():
        return None
    return "\n".join(p.read_text() for p in sorted(main.parent.glob("*.py")))


def test_the_architecture_maps_every_package() -> None:
    """Each subpackage of `bot/` and `runtime/` has its row in the package map."""
    packages = sorted(
        init.parent.relative_to(ROOT).as_posix()
        for top in ("bot", "runtime")
        for init in (ROOT / top).rglob("__init__.py")
        if init.parent != ROOT / top
    )
    assert [p for p in packages if f"\n| `{p}/` |" not in ARCHITECTURE] == []


def test_the_package_map_names_modules_of_each_package() -> None:
    """In a row of the map (`| `runtime/jobs/` | ... | `queue.py` ... |`), every module named
    is one of that package's."""
    missing = set()
    for package, cells in re.findall(
        r"^\| `((?:bot|runtime)/[\w/]+)/` \|(.*)$", ARCHITECTURE, re.M
    ):
        for name in re.findall(r"`(\w+\.py)`", cells):
            if not (ROOT / package / name).is_file():
                missing.add(f"{package}/{name}")
    assert missing == set()


def test_the_screenshot_it_shows_is_committed() -> None:
    for page, text in PAGES.items():
        for image in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
            assert ((ROOT / page).parent / image).is_file(), image


def test_the_tour_ends_with_stats_and_a_backtest_of_the_demo_policy() -> None:
    tour = README.split("## Try it in the console", 1)[1].split("\n## ", 1)[0]
    last = re.split(r"^\d+\. ", tour, flags=re.MULTILINE)[-1]
    assert "`/agent stats`" in last and "stats" in COMMANDS
    backtest = "python -m runtime policy backtest bot/console/demo_policy.toml --demo"
    assert backtest in last
    assert (ROOT / "bot" / "console" / "demo_policy.toml").is_file()
