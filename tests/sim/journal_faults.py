"""A simulated power loss for the controllers' Raft journals: everything not fsynced is lost.

The page cache survives ``kill -9``; a power loss keeps only what was fsynced. With
``pykraft.quorum.durable.images=true`` a controller keeps, after each sync of its journal and of
its term/vote file, a copy of exactly what that sync made durable (``<name>.durable``,
``quorum/raft_journal.DurableImages``). ``power_off`` (call it once the processes are dead, or
once a journal object is abandoned without being closed) puts those copies back in place of
the page cache's version; a file never synced is gone, as a never-synced file of a real disk
may be. The dump and the checkpoints are fsynced when written and are kept as they are.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from pykraft.quorum.raft_journal import DURABLE_SUFFIX

# pysyncobj's journal and its currentTerm/votedFor/commit-index file (quorum/raft.py).
JOURNAL_FILES = ("journal.bin", "journal.bin.meta")


def power_off(raft_dir: Path) -> dict[str, int]:
    """Drop every unsynced byte of the journal files in ``raft_dir``; returns, per file, the
    bytes that survived (-1: the file is gone)."""
    survived: dict[str, int] = {}
    for name in JOURNAL_FILES:
        path = raft_dir / name
        image = raft_dir / (name + DURABLE_SUFFIX)
        if image.exists():
            temporary = raft_dir / (name + ".restoring")
            shutil.copyfile(image, temporary)
            os.replace(temporary, path)
            survived[name] = path.stat().st_size
        else:
            path.unlink(missing_ok=True)
            survived[name] = -1
    return survived
