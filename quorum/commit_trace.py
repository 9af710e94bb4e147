"""Where a metadata commit's time goes: a timestamp at every hand-off, off by default (issue 18).

Theory of operation
-------------------
``PYKRAFT_COMMIT_TRACE=DIR`` in a controller's environment makes it append one line per event to
``DIR/trace-<node.id>.tsv``: ``event<TAB>raft index<TAB>CLOCK_MONOTONIC ns``. The clock is
system-wide, so the controllers' files (and a client's own timestamps, ``time.monotonic_ns``)
merge into one timeline per Raft index; ``quorum/commit_timeline.py`` takes the medians and
``bench/quorum.py --trace`` prints them. Unset (the default), ``open_metadata_raft`` builds the
plain classes: not one hook below runs, and the write path pays one ``is None`` test.

The events, in the order a commit on 3 controllers passes them (``TRACE_EVENTS``):

* leader, event loop: ``propose`` (``MetadataRaft.propose`` called);
* leader, Raft thread: ``appended`` (``_checkCommandsToApply`` put it in the log),
  ``ae_start`` / ``ae_sent`` (around the ``__sendAppendEntries`` that first carried it: pickle,
  zlib, Fernet and ``send`` for every follower), ``synced`` (the journal's sync covering it,
  ``controller.quorum.fsync``);
* follower, Raft thread: ``ae_received`` (AppendEntries decoded and handed to pysyncobj),
  ``synced``, ``answer_sent`` (its ``next_node_idx`` answer written to the socket);
* leader, Raft thread: ``answer_received`` (the first follower's answer decoded: with the
  leader, a majority of 3), ``applied`` (committed, applied, its callback called);
* leader, event loop: ``resumed`` (``commit_blob``'s await returned).

An index's event is kept the first time it happens (a resent AppendEntries does not move it).
Events are buffered and written every ``FLUSH_EVERY`` events and on ``close``; the hooks take
one lock and one clock read each.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykraft.quorum.metadata_view import ResultCallback
from pykraft.storage.hop_trace import trace_clock_ns

ENV = "PYKRAFT_COMMIT_TRACE"
TRACE_EVENTS = (
    "propose",
    "appended",
    "ae_start",
    "ae_sent",
    "synced",
    "ae_received",
    "answer_sent",
    "answer_received",
    "applied",
    "resumed",
)
# Bounds (STYLE.md §7): events buffered before a write; indexes remembered per event.
FLUSH_EVERY = 512
MAX_REMEMBERED_INDEXES = 4096


class CommitTrace:
    """Buffered ``(event, index, ns)`` lines of one process; thread-safe."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._events: list[tuple[str, int, int]] = []
        # event -> indexes already marked (first time wins), oldest first.
        self._seen: dict[str, dict[int, None]] = {}
        # The highest index each range event has covered.
        self._covered: dict[str, int] = {}

    @classmethod
    def from_environment(cls, node_id: int) -> CommitTrace | None:
        directory = os.environ.get(ENV, "").strip()
        return cls(Path(directory) / f"trace-{node_id}.tsv") if directory else None

    def mark(self, event: str, index: int, at_ns: int | None = None) -> None:
        """``event`` happened to ``index`` now (or at ``at_ns``), unless it was marked before."""
        now = trace_clock_ns() if at_ns is None else at_ns
        with self._lock:
            seen = self._seen.setdefault(event, {})
            if index in seen:
                return
            seen[index] = None
            if len(seen) > MAX_REMEMBERED_INDEXES:
                del seen[next(iter(seen))]
            self._events.append((event, index, now))
            flush = len(self._events) >= FLUSH_EVERY
        if flush:
            self.flush()

    def mark_up_to(self, event: str, last_index: int, at_ns: int | None = None) -> None:
        """``event`` happened to every index after the last one it covered, up to
        ``last_index`` (a send, a sync or an answer covers all the entries before it)."""
        now = trace_clock_ns() if at_ns is None else at_ns
        first = self._covered.get(event, last_index - 1) + 1
        if last_index < first:
            return
        self._covered[event] = last_index
        for index in range(max(first, last_index - MAX_REMEMBERED_INDEXES + 1), last_index + 1):
            self.mark(event, index, now)

    def flush(self) -> None:
        with self._lock:
            events, self._events = self._events, []
        if events:
            with open(self.path, "a", encoding="ascii") as file:
                file.writelines(f"{event}\t{index}\t{ns}\n" for event, index, ns in events)

    def close(self) -> None:
        self.flush()


class CommitTraceMixin:
    """Mixed into a ``MetadataRaft`` class only when tracing (``traced_class``): pysyncobj's
    hand-offs, each override calling pysyncobj's own method."""

    commit_trace: CommitTrace
    # The index of the last traced proposal applied (the write path proposes one at a time).
    last_traced_index: int
    raftLastApplied: int
    _SyncObj__getCurrentLogIndex: Callable[[], int]

    def propose(self, blob: bytes, on_result: ResultCallback, records: Any = None) -> None:
        proposed_ns = trace_clock_ns()
        trace = self.commit_trace

        def traced(result: Any, fail_reason: int) -> None:
            index = self.raftLastApplied + 1  # pysyncobj counts it applied after the callback
            trace.mark("propose", index, proposed_ns)
            trace.mark("applied", index)
            self.last_traced_index = index
            on_result(result, fail_reason)

        super().propose(blob, traced, records)  # type: ignore[misc]

    def _checkCommandsToApply(self) -> None:
        super()._checkCommandsToApply()  # type: ignore[misc]
        self.commit_trace.mark_up_to("appended", self._SyncObj__getCurrentLogIndex())

    def _SyncObj__sendAppendEntries(self) -> None:
        started_ns = trace_clock_ns()
        super()._SyncObj__sendAppendEntries()  # type: ignore[misc]
        last = self._SyncObj__getCurrentLogIndex()
        self.commit_trace.mark_up_to("ae_start", last, started_ns)
        self.commit_trace.mark_up_to("ae_sent", last)

    def _sync_journal(self, journal: Any) -> None:
        super()._sync_journal(journal)  # type: ignore[misc]
        self.commit_trace.mark_up_to("synced", self._SyncObj__getCurrentLogIndex())

    def _send_next_node_idx(self, node: Any, *arguments: Any) -> None:
        super()._send_next_node_idx(node, *arguments)  # type: ignore[misc]
        _reset, next_index, success = arguments
        if success and next_index is not None:
            self.commit_trace.mark_up_to("answer_sent", next_index - 1)

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        received_ns = trace_clock_ns()
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == "append_entries" and message.get("entries"):
            self.commit_trace.mark_up_to("ae_received", message["entries"][-1][1], received_ns)
        elif kind == "next_node_idx" and message.get("success"):
            self.commit_trace.mark_up_to("answer_received", message["next_node_idx"] - 1)
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]

    def _doDestroy(self) -> None:
        try:
            super()._doDestroy()  # type: ignore[misc]
        finally:
            self.commit_trace.close()


def traced_class(raft_class: type[Any], trace: CommitTrace) -> type[Any]:
    """``raft_class`` with the hooks of ``CommitTraceMixin`` ahead of its own, writing to
    ``trace`` (a class attribute: pysyncobj ticks before ``__init__`` returns)."""
    return type(
        f"Traced{raft_class.__name__}",
        (CommitTraceMixin, raft_class),
        {"commit_trace": trace, "last_traced_index": -1},
    )
