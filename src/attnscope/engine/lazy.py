"""Lazy package exports (PEP 562): a sub-package names its public functions without importing them.

Plain-data modules (the attention record, beam results) live beside torch-heavy ones; importing one must not
pull torch into a figure builder, so a package's `__init__` maps each exported name to its module and imports
that module only when the name is first used.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable


def exports(package: str, modules: dict[str, list[str]]) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """(`__all__`, `__getattr__`, `__dir__`) for `package`, exporting each name from its module."""
    home = {name: module for module, names in modules.items() for name in names}

    def getattr_(name: str) -> Any:
        if name not in home:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home[name]}"), name)

    return sorted(home), getattr_, lambda: sorted(home)
