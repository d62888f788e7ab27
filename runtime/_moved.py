"""Import paths that moved in the one-package-per-concept layout, kept for one release.

A tool written before it imported `idempotency_key` from `runtime.tool_journal` and `preview`
from `runtime.previews`; both now come from `runtime.tools`. Importing an old path still works
and gives the module at its new home, with a `DeprecationWarning` naming the import to write
instead. One finder on `sys.meta_path` (installed by `runtime/__init__.py`) answers for every
old name, so no thin module per old path sits in `runtime/`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings  # its stacklevel skips the import system's frames: 2 is the import line
from collections.abc import Sequence
from types import ModuleType

# Old module → (its new home, the import a tool author should write now).
MOVED: dict[str, tuple[str, str]] = {
    "runtime.tool_journal": (
        "runtime.journal.invoker",
        "from runtime.tools import idempotency_key",
    ),
    "runtime.previews": ("runtime.calls.previews", "from runtime.tools import preview"),
    "runtime.call_starts": ("runtime.journal.starts", "from runtime.tools import safe_to_repeat"),
}


def moved_message(old: str) -> str:
    new, instead = MOVED[old]
    return f"{old} has moved to {new} and will be removed in the next release; write `{instead}`"


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: ModuleType) -> None:
        self._old = old
        self._new = new
        self._new_spec = new.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        # The new module itself, not a copy: its names, and anything patched onto it, are one.
        return self._new

    def exec_module(self, module: ModuleType) -> None:
        # Nothing to run, but the import system stamped the alias's spec on the module: give it
        # back its own, so that it still says where it lives (`__spec__.name`, reload).
        module.__spec__ = self._new_spec
        warnings.warn(moved_message(self._old), DeprecationWarning, stacklevel=2)


class MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        new = importlib.import_module(MOVED[fullname][0])
        return importlib.machinery.ModuleSpec(fullname, _MovedLoader(fullname, new))


def install() -> None:
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
