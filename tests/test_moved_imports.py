"""A tool written before the layout change still imports, told once where the names live now."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest

import runtime.tools
from runtime._moved import MOVED


@pytest.fixture
def fresh_import() -> Iterator[None]:
    """An old path is imported as by a new process: not yet in `sys.modules`."""
    before = {name: sys.modules.pop(name) for name in MOVED if name in sys.modules}
    yield
    for name in MOVED:
        sys.modules.pop(name, None)
    sys.modules.update(before)


@pytest.mark.parametrize(
    ("old", "name", "instead"),
    [
        ("runtime.tool_journal", "idempotency_key", "from runtime.tools import idempotency_key"),
        ("runtime.previews", "preview", "from runtime.tools import preview"),
    ],
)
def test_an_old_tool_author_path_warns_and_gives_the_same_function(
    fresh_import: None, old: str, name: str, instead: str
) -> None:
    with pytest.warns(DeprecationWarning, match=f"{old} has moved.*`{instead}`"):
        module = importlib.import_module(old)
    assert getattr(module, name) is getattr(runtime.tools, name)
    # The module still says where it lives.
    assert module.__spec__ is not None and module.__spec__.name == MOVED[old][0]


def test_the_from_import_form_warns_too(fresh_import: None) -> None:
    with pytest.warns(DeprecationWarning, match="runtime.tool_journal has moved") as caught:
        from runtime.tool_journal import idempotency_key  # type: ignore[import-not-found, import-untyped, unused-ignore]
    assert idempotency_key is runtime.tools.idempotency_key
    # It points at the line with the old import, not into the import system.
    assert [w.filename for w in caught] == [__file__]


def test_a_path_that_never_existed_is_still_an_import_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("runtime.no_such_module")
