"""Crash-safe whole-file replacement.

A reader must see either the old content or the new content, never a torn mix, even if the
machine loses power mid-write. The recipe (Kafka's ``Utils.atomicMoveWithFallback`` with
``needFlushParentDir``): write a temp file in the SAME directory (rename is only atomic within
one file system), fsync it so its bytes are on disk before its name is, rename it over the
target, then fsync the directory so the rename itself survives a crash.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

TEMP_SUFFIX = ".tmp"


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace ``path`` with ``data`` atomically and durably. ``durable=False`` skips both
    fsyncs: still atomic against a process crash (the rename), but a power loss may keep the
    old content; the caller makes it durable later (``sync_file``)."""
    temp = path.with_name(path.name + TEMP_SUFFIX)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    os.close(fd)
    os.replace(temp, path)
    if durable:
        fsync_directory(path.parent)


def sync_file(path: Path, *, gone_is_synced: bool = False) -> None:
    """Make a file written with ``durable=False`` durable: its bytes, then its name.
    ``gone_is_synced``: a file deleted meanwhile (a producer snapshot below the log start)
    needs no sync; its directory must still be there."""
    (sync_if_exists if gone_is_synced else _fsync_path)(path)
    fsync_directory(path.parent)


def sync_if_exists(path: Path) -> None:
    """fsync a file by name, off the thread that owns it (``RolledFlush``): one deleted
    meanwhile (retention, truncation) needs no sync, so a missing ``path`` is no error."""
    try:
        _fsync_path(path)
    except FileNotFoundError:
        return


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make the directory's entries (creates, renames, deletes) durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
