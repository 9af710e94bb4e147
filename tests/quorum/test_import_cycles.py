"""No import cycle among the controller's modules, counting imports inside functions too.

``quorum/service.py`` used to import ``service_admin`` and ``service_brokers`` inside
``build_app`` because both imported it back; a deferred import hides a cycle from the import
system, not from a reader. The shared helpers now live in ``service_http``, and this test keeps
it that way for every module under ``quorum/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

QUORUM = Path(__file__).resolve().parents[2] / "quorum"


def module_name(path: Path) -> str:
    parts = ("pykraft", *path.relative_to(QUORUM.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The ``quorum`` modules ``path`` imports anywhere in its body (top level or deferred)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found & known


def import_graph() -> dict[str, set[str]]:
    paths = sorted(QUORUM.rglob("*.py"))
    known = {module_name(path) for path in paths}
    return {module_name(path): imports_of(path, known) - {module_name(path)} for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path of module names (first == last), or None (depth-first search)."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        iterators = [iter(sorted(graph[start]))]
        while iterators:
            successor = next(iterators[-1], None)
            if successor is None:
                done.add(path.pop())
                iterators.pop()
            elif successor in path:
                return [*path[path.index(successor) :], successor]
            elif successor not in done:
                path.append(successor)
                iterators.append(iter(sorted(graph[successor])))
    return None


def test_quorum_modules_import_no_cycle() -> None:
    assert find_cycle(import_graph()) is None


def test_the_cycle_finder_sees_a_deferred_cycle() -> None:
    """The checker itself must be able to fail: the old service <-> service_admin shape."""
    graph = {
        "pykraft.quorum.service": {"pykraft.quorum.service_admin", "pykraft.quorum.node"},
        "pykraft.quorum.service_admin": {"pykraft.quorum.service", "pykraft.quorum.node"},
        "pykraft.quorum.node": set(),
    }
    assert find_cycle(graph) == [
        "pykraft.quorum.service",
        "pykraft.quorum.service_admin",
        "pykraft.quorum.service",
    ]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_deferred_import_counts(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def build():\n    from pykraft.quorum.service_admin import add_admin_routes\n"
    )
    assert imports_of(sample, {"pykraft.quorum.service_admin"}) == {"pykraft.quorum.service_admin"}
