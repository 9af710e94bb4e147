"""Writing pysyncobj's full dump on a background thread.

pysyncobj writes a dump synchronously on its Raft thread whenever a custom ``serializer`` is
configured (it only forks for its own pickle format). A 100,000-partition image takes seconds
to write, and a Raft thread that stops for longer than the election timeout sends no
heartbeats: the followers depose a healthy leader. ``BackgroundSerializer`` keeps pysyncobj's
``Serializer`` interface and protocol but runs the write on a thread:

  serialize(data, id)   Raft thread: ``prepare(data)`` captures the (immutable) state and the
                        two Raft entries, then a thread writes ``<dump>.tmp``, fsyncs it,
                        renames it over the dump and fsyncs the directory.
  checkSerializing()    SERIALIZING while the thread runs, then SUCCESS or FAILED once; only
                        after SUCCESS does pysyncobj truncate its journal, so the journal always
                        holds every entry the durable dump does not.
  setTransmissionData   (a snapshot installed by the leader) waits for a running write first,
                        so our older dump can never be renamed over the installed one, and
                        fsyncs the installed dump and its directory (pysyncobj does not)
                        before the follower loads and acknowledges it (issue 17).

Reading, transmission to followers and installing snapshots are pysyncobj's own code.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pysyncobj import SERIALIZER_STATE
from pysyncobj.serializer import Serializer

logger = logging.getLogger(__name__)

Prepare = Callable[[Any], Any]
Write = Callable[[Path, Any], None]
Load = Callable[[str], tuple[Any, Any, Any]]
_FAILED = object()


class BackgroundSerializer(Serializer):  # type: ignore[misc]
    def __init__(
        self,
        file_name: str,
        transmission_batch_size: int,
        prepare: Prepare,
        write: Write,
        load: Load,
    ) -> None:
        super().__init__(file_name, transmission_batch_size, False, None, load, None)
        self._file_name = Path(file_name)
        self._prepare = prepare
        self._write = write
        self._thread: threading.Thread | None = None
        self._outcome = SERIALIZER_STATE.NOT_SERIALIZING
        self._current_id: Any = None

    def serialize(self, data: Any, id: Any) -> None:  # pysyncobj names the argument id
        if self._thread is not None:
            return
        self._current_id = id
        self._outcome = SERIALIZER_STATE.FAILED
        try:
            # pysyncobj hands a custom serializer everything but its own pickled state.
            prepared = self._prepare(data[1:])
        except Exception:
            logger.exception("preparing the metadata dump failed")
            prepared = _FAILED
        self._thread = threading.Thread(
            target=self._run, args=(prepared,), name="metadata-dump", daemon=True
        )
        self._thread.start()

    def _run(self, prepared: Any) -> None:
        if prepared is _FAILED:
            return
        temp = self._file_name.with_name(self._file_name.name + ".tmp")
        try:
            self._write(temp, prepared)
            os.replace(temp, self._file_name)
            _fsync_directory(self._file_name.parent)
        except Exception:
            logger.exception("writing the metadata dump %s failed", self._file_name)
            return
        self._outcome = SERIALIZER_STATE.SUCCESS

    def checkSerializing(self) -> tuple[int, Any]:
        thread = self._thread
        if thread is None:
            return SERIALIZER_STATE.NOT_SERIALIZING, None
        if thread.is_alive():
            return SERIALIZER_STATE.SERIALIZING, self._current_id
        thread.join()
        self._thread = None
        return self._outcome, self._current_id

    def wait_idle(self) -> None:
        """Block until a running write finished (its outcome is still reported once)."""
        thread = self._thread
        if thread is not None:
            thread.join()

    def setTransmissionData(self, data: Any) -> bool:
        """A dump received from the leader; pysyncobj renames it in place without a sync.
        Synced (file, then directory) before the follower loads it and acknowledges it."""
        self.wait_idle()
        complete = bool(super().setTransmissionData(data))
        if complete:
            _fsync_path(self._file_name)
            _fsync_directory(self._file_name.parent)
        return complete


def _fsync_path(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_directory(directory: Path) -> None:
    _fsync_path(directory)
