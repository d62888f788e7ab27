"""What a package's face (`runtime/<package>/__init__.py`) hands out, loaded on first use.

A face names the module inside that holds each name; importing the package loads none of them,
so a module inside may import a sibling package without a cycle at import time.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name of `where` from its module, once asked."""

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{where[name]}"), name)

    return __getattr__
