"""ARCHITECTURE.md stays true to the tree: every repository path it names in backticks exists.

A path of ours is a backticked span that starts with one of the repository's top-level folders
(``storage/``, ``broker/``, ``tests/``, ...) or is one of its top-level files, names only path
characters, and — unless it ends in ``/`` (a folder) — ends in a file suffix. Anything else in
backticks (``Partition.carry_out``, ``now_ms``, ``GET /v1/metadata/records``) is not a path and
is not checked. ``../shared/`` documents live outside the repository and are skipped too.

Inside the code map a room's heading names its folder (``### `storage/` — ...``), and its
text names modules relative to it (`` `unified_log.py` ``, `` `group/` ``): each must exist
somewhere under that folder. And every test named in backticks (`` `test_import_direction` ``)
must be a test function under ``tests/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "ARCHITECTURE.md"

# The repository's top-level folders a document may point into (DESIGN.md §2).
TOP_LEVEL_FOLDERS = (
    "storage",
    "protocol",
    "fetcher",
    "replica",
    "coordinator",
    "broker",
    "metadata",
    "quorum",
    "export",
    "pykraft",
    "tests",
    "bench",
    "examples",
)
TOP_LEVEL_FILES = ("pyproject.toml", "setup.py", "Makefile", "README.md", "ARCHITECTURE.md")

BACKTICKED = re.compile(r"`([^`\n]+)`")
PATH_CHARACTERS = re.compile(r"[A-Za-z0-9_./+-]+")
FILE_SUFFIX = re.compile(r"\.[A-Za-z0-9]+$")


def path_of_ours(span: str) -> str | None:
    """``span`` as a repository path when it looks like one of ours, else None."""
    if span in TOP_LEVEL_FILES:
        return span
    if not PATH_CHARACTERS.fullmatch(span) or "/" not in span:
        return None
    if span.split("/", 1)[0] not in TOP_LEVEL_FOLDERS or ".." in span.split("/"):
        return None
    if span.endswith("/") or FILE_SUFFIX.search(span.rsplit("/", 1)[1]):
        return span
    return None


def named_paths(text: str) -> list[str]:
    """Every path of ours named in backticks in ``text``, once each, in order of appearance."""
    found = (path_of_ours(span.strip()) for span in BACKTICKED.findall(text))
    return list(dict.fromkeys(path for path in found if path is not None))


ROOM_HEADING = re.compile(r"^### `([a-z_]+/)`", re.MULTILINE)
BARE_MODULE = re.compile(r"[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*(\.(py|c)|/)")
TEST_NAME = re.compile(r"test_[a-z0-9_]+")


def rooms(text: str) -> dict[str, str]:
    """Each code-map room's folder and the text under its heading, up to the next heading."""
    sections = re.split(r"^#{2,3} ", text, flags=re.MULTILINE)
    found = {}
    for section in sections:
        heading = ROOM_HEADING.match("### " + section)
        if heading is not None:
            found[heading.group(1)] = section
    return found


def room_modules(section: str) -> list[str]:
    """Bare module names (``unified_log.py``, ``group/``, ``api/records.py``) in a room's text."""
    spans = (span.strip() for span in BACKTICKED.findall(section))
    return list(
        dict.fromkeys(
            span for span in spans if BARE_MODULE.fullmatch(span) and path_of_ours(span) is None
        )
    )


def exists_under(folder: str, name: str) -> bool:
    """``name`` (a file, or a folder ending in ``/``) somewhere under the room ``folder``."""
    base = ROOT / folder
    if name.endswith("/"):
        return any(found.is_dir() for found in base.rglob(name.rstrip("/")))
    return (base / name).is_file() or any(found.is_file() for found in base.rglob(name))


def defined_tests() -> set[str]:
    return {
        match.group(1)
        for path in (ROOT / "tests").rglob("test_*.py")
        for match in re.finditer(r"^def (test_[a-z0-9_]+)", path.read_text(), re.MULTILINE)
    }


def exists(path: str) -> bool:
    target = ROOT / path
    return target.is_dir() if path.endswith("/") else target.is_file()


def test_every_path_the_document_names_exists() -> None:
    missing = [path for path in named_paths(DOCUMENT.read_text()) if not exists(path)]
    assert missing == [], f"ARCHITECTURE.md names paths that do not exist: {missing}"


def test_every_module_a_room_names_exists_in_that_room() -> None:
    missing = [
        f"{folder}{name}"
        for folder, section in rooms(DOCUMENT.read_text()).items()
        for name in room_modules(section)
        if not exists_under(folder, name)
    ]
    assert missing == [], f"ARCHITECTURE.md's code map names missing modules: {missing}"


def test_every_test_the_document_names_exists() -> None:
    named = {
        span.strip()
        for span in BACKTICKED.findall(DOCUMENT.read_text())
        if TEST_NAME.fullmatch(span.strip())
    }
    assert sorted(named - defined_tests()) == []


def test_the_document_names_the_rooms_it_maps() -> None:
    """The check has something to check: the code map names every package folder."""
    named = set(named_paths(DOCUMENT.read_text()))
    assert {f"{folder}/" for folder in TOP_LEVEL_FOLDERS[:10]} <= named
    assert set(rooms(DOCUMENT.read_text())) == {f"{folder}/" for folder in TOP_LEVEL_FOLDERS[:10]}


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        ("broker/replica_manager.py", "broker/replica_manager.py"),
        ("replica/", "replica/"),
        ("metadata/api/", "metadata/api/"),
        ("storage/_record_walk.c", "storage/_record_walk.c"),
        ("tests/sim/test_replication_sim.py", "tests/sim/test_replication_sim.py"),
        ("pyproject.toml", "pyproject.toml"),
        ("../shared/DESIGN.md", None),
        ("Partition.carry_out", None),
        ("now_ms", None),
        ("GET /v1/metadata/records", None),
        ("/v1/openapi.json", None),
        ("pykraft.broker.principal", None),
        ("storage/topic_partition", None),
        ("docs/elsewhere.md", None),
        ("broker/../quorum/node.py", None),
    ],
)
def test_what_counts_as_a_path_of_ours(span: str, expected: str | None) -> None:
    assert path_of_ours(span) == expected


def test_a_missing_path_is_reported(tmp_path: Path) -> None:
    """The checker itself must be able to fail."""
    text = "see `broker/no_such_module.py` and `replica/` and `Partition`"
    paths = named_paths(text)
    assert paths == ["broker/no_such_module.py", "replica/"]
    assert [path for path in paths if not exists(path)] == ["broker/no_such_module.py"]


def test_a_missing_module_in_a_room_is_reported() -> None:
    text = (
        "## Code map\n### `storage/` — logs\n"
        "`unified_log.py`, `no_such.py`, `UnifiedLog`\n## Time\n"
    )
    section = rooms(text)["storage/"]
    assert room_modules(section) == ["unified_log.py", "no_such.py"]
    assert [name for name in room_modules(section) if not exists_under("storage/", name)] == [
        "no_such.py"
    ]


# ----------------------------------------------------------------- modules over 400 lines

BIG_MODULE_LINES = 400
# The table's figure may lag the file by this much before it must be re-measured.
BIG_MODULE_SLACK_LINES = 40
_TABLE_ROW = re.compile(r"^\| `(?P<path>[\w/]+\.py)` \| (?P<lines>\d+) \|", re.MULTILINE)


def big_modules() -> dict[str, int]:
    """Every package module (tests, bench and examples excluded) over 400 lines -> its length."""
    packages = [
        folder for folder in TOP_LEVEL_FOLDERS if folder not in {"tests", "bench", "examples"}
    ]
    found: dict[str, int] = {}
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):  # rglob does not follow pykraft's links
            lines = len(path.read_text().splitlines())
            if lines > BIG_MODULE_LINES:
                found[str(path.relative_to(ROOT))] = lines
    return found


def test_every_module_over_400_lines_has_its_reason_in_the_table() -> None:
    """STYLE: past ~400 lines a module wants splitting, past 600 it needs a reason here."""
    section = DOCUMENT.read_text().split("## Modules over 400 lines", 1)[1].split("\n## ", 1)[0]
    listed = {match["path"]: int(match["lines"]) for match in _TABLE_ROW.finditer(section)}
    actual = big_modules()
    assert sorted(set(actual) - set(listed)) == [], "over 400 lines but not in the table"
    stale = {
        path: (listed[path], lines)
        for path, lines in actual.items()
        if abs(listed[path] - lines) > BIG_MODULE_SLACK_LINES
    }
    assert stale == {}, "the table's line counts (listed, actual) need re-measuring"
