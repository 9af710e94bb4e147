"""Ship pykraft to the executors, so a cluster whose workers lack it runs the jobs anyway.

The data sources' classes reach the executors (and the driver-side planner, a separate Python
process) pickled by reference, ``pykraft.export.spark_sources.PykraftLogDataSource``: a Python
that cannot import ``pykraft`` fails with ``ModuleNotFoundError``. ``package_zip`` builds a zip
of the running pykraft package (its ``pykraft/<package>`` links followed, so the zip holds real
files), and ``ship`` adds it, with the user's ``--py-files``, through ``SparkContext.addPyFile``:
what ``spark-submit --py-files`` (``spark.submit.pyFiles``) does, also for a driver that was not
started by ``spark-submit``. It must run before the sources are registered: a registered
source carries the Python includes known at that moment. Python files only: the C record walk
(``storage/_record_walk.c``) falls back to its Python twin where the extension is absent.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# What the jobs need at run time: code and the schemas kafka-python loads.
SHIPPED_SUFFIXES = (".py", ".json")
SKIPPED_DIRECTORIES = frozenset({"__pycache__", "tests", ".mypy_cache"})
# A bound on the walk: pykraft holds a few hundred files.
MAX_SHIPPED_FILES = 20_000


def package_root() -> Path:
    """The directory of the running ``pykraft`` package: this module is imported as
    ``pykraft.export.shipping``, through the ``pykraft/export`` link in a checkout (the path is
    not resolved, so it stays below ``pykraft/``)."""
    root = Path(os.path.abspath(__file__)).parent.parent
    assert (root / "__init__.py").exists() and root.name == "pykraft", root
    return root


def _package_files(root: Path) -> Iterator[tuple[Path, str]]:
    """``(file, name in the zip)`` for each shipped file below ``root``, links followed."""
    count = 0
    for directory, subdirectories, files in os.walk(root, followlinks=True):
        subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES)
        for name in sorted(files):
            if name.endswith(SHIPPED_SUFFIXES):
                path = Path(directory) / name
                count += 1
                assert count <= MAX_SHIPPED_FILES, f"more than {MAX_SHIPPED_FILES} files in {root}"
                yield path, f"pykraft/{path.relative_to(root).as_posix()}"


def package_zip(target_dir: Path, root: Path | None = None) -> Path:
    """Zip the pykraft package into ``target_dir`` (named by a digest of its contents, so an
    unchanged package is zipped once per directory); returns the zip's path."""
    entries = [(name, path.read_bytes()) for path, name in _package_files(root or package_root())]
    digest = hashlib.sha256()
    for name, data in entries:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    target = target_dir / f"pykraft-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    partial = target.with_suffix(".zip.partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries:
            # A fixed date: the same package makes the same bytes.
            archive.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    partial.replace(target)
    return target


def ship(spark: Any, py_files: Sequence[str] = ()) -> Path:
    """Add the pykraft zip and ``py_files`` to every Python the job starts; returns the zip."""
    zipped = package_zip(Path(tempfile.gettempdir()))
    context = spark.sparkContext
    for path in (str(zipped), *py_files):
        context.addPyFile(path)
    return zipped
