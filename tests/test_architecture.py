"""Architecture invariants from DESIGN.md §2 and STYLE.md §1, checked on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "storage", "protocol", "fetcher", "replica", "broker",
    "metadata", "quorum", "export", "pykraft",
]

# Which of our packages each package may import (DESIGN.md §2).
ALLOWED: dict[str, set[str]] = {
    "storage": set(),
    "protocol": {"storage"},
    "fetcher": {"storage", "protocol"},
    "replica": {"storage", "protocol", "fetcher", "metadata"},
    "broker": {"storage", "protocol", "fetcher", "replica", "metadata"},
    "metadata": set(),
    "quorum": {"metadata"},
    "export": {"storage", "metadata"},
    "pykraft": set(PACKAGES) - {"pykraft"},
}

# Pure cores: no I/O, clock or randomness (STYLE.md §1-2).
IO_MODULES = {"asyncio", "socket", "threading", "time", "random", "os", "aiohttp", "pysyncobj"}
PURE_CORES = [
    "metadata/records.py", "metadata/image.py", "metadata/delta.py", "metadata/local_changes.py",
    "quorum/controller.py", "quorum/managers",
    "fetcher/truncation.py", "fetcher/state.py", "fetcher/responses.py",
    "replica",
    "broker/connection_quotas.py",
    "broker/group/state.py", "broker/group/rebalance.py", "broker/group/manager.py",
    "broker/group/coordinator.py", "broker/group/offsets.py", "broker/group/records.py",
    "broker/group/effects.py",
    "export/replica_choice.py",
]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def python_files(relative: str) -> list[Path]:
    target = ROOT / relative
    if target.is_file():
        return [target]
    return sorted(target.rglob("*.py")) if target.is_dir() else []


@pytest.mark.parametrize("package", PACKAGES)
def test_import_direction(package: str) -> None:
    forbidden = set(PACKAGES) - ALLOWED[package] - {package}
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & forbidden)
        for path in python_files(package)
        if imported_roots(path) & forbidden
    }
    assert offenders == {}, f"{package} may only import {sorted(ALLOWED[package])}"


@pytest.mark.parametrize("core", PURE_CORES)
def test_pure_cores_do_no_io(core: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & IO_MODULES)
        for path in python_files(core)
        if imported_roots(path) & IO_MODULES
    }
    assert offenders == {}


def test_metadata_never_imports_asyncio() -> None:
    offenders = [str(p) for p in python_files("metadata") if "asyncio" in imported_roots(p)]
    assert offenders == []


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself must be able to fail."""
    sample = tmp_path / "sample.py"
    sample.write_text("import asyncio\nfrom broker.x import y\nfrom . import z\n")
    assert imported_roots(sample) == {"asyncio", "broker"}
