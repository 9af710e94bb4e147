"""The controller's view of the committed metadata log, on the asyncio thread.

MetadataRaft applies entries on its Raft thread; ``RaftBridge`` forwards each outcome to the
event loop with ``call_soon_threadsafe`` (DESIGN.md §3.7), in order, so ``MetadataView`` always
holds a prefix of the committed log: the image at its last offset and the retained window of
recent batches (``quorum.log_window``). A proposal's own result is delivered after its batch
reached the view, so a writer that awaited its commit reads an image that includes it.

Long polls (``wait_beyond``) wake on every change of the view.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from pykraft.metadata.image import MetadataImage
from pykraft.quorum.log_window import LogWindow, WindowRead
from pykraft.quorum.raft_state import Applied, ApplyResult, MetadataState

logger = logging.getLogger(__name__)

# pysyncobj calls a proposal's callback with (result, FAIL_REASON code) on the Raft thread.
ResultCallback = Callable[[ApplyResult | None, int], None]


class MetadataView:
    def __init__(self, window_records: int) -> None:
        self._state = MetadataState()
        self.window = LogWindow(window_records)
        self._changed = asyncio.Event()
        self._closing = False
        # Callbacks run after every change (the periodic task uses one to note activity).
        self.observers: list[Callable[[Applied | None], None]] = []

    @property
    def image(self) -> MetadataImage:
        return self._state.image

    @property
    def last_offset(self) -> int:
        return self._state.last_offset

    @property
    def next_offset(self) -> int:
        return self._state.next_offset

    def on_applied(self, applied: Applied) -> None:
        self._state = applied.state
        if applied.batch is not None:
            if applied.batch.base_offset != self.window.next_offset:
                # A view that missed batches (it never should) restarts its window rather than
                # serving a log with a hole in it.
                logger.error(
                    "metadata view missed offsets %d..%d",
                    self.window.next_offset,
                    applied.batch.base_offset - 1,
                )
                self.window.reset(applied.batch.base_offset)
            self.window.append(applied.batch)
        self._notify(applied)

    def on_state_loaded(self, state: MetadataState) -> None:
        self._state = state
        self.window.reset(state.next_offset)
        self._notify(None)

    def on_snapshot_written(self, end_offset: int) -> None:
        self.window.retain_from(end_offset)

    def _notify(self, applied: Applied | None) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
        for observer in self.observers:
            observer(applied)

    def read(self, from_offset: int, max_records: int) -> WindowRead:
        return self.window.read(from_offset, max_records)

    def close(self) -> None:
        """Release every long poll now (the controller is stopping)."""
        self._closing = True
        self._changed.set()

    async def wait_beyond(self, offset: int, timeout_s: float) -> bool:
        """Wait until the log holds ``offset`` + 1 or more records (True), or time out."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.window.next_offset <= offset and not self._closing:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                return False
        return self.window.next_offset > offset


class RaftBridge:
    """Implements ``RaftListener`` on the Raft thread by scheduling work on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, view: MetadataView) -> None:
        self._loop = loop
        self._view = view

    def handle_applied(self, applied: Applied) -> None:
        self._loop.call_soon_threadsafe(self._view.on_applied, applied)

    def handle_state_loaded(self, state: MetadataState) -> None:
        self._loop.call_soon_threadsafe(self._view.on_state_loaded, state)

    def handle_snapshot_written(self, end_offset: int) -> None:
        self._loop.call_soon_threadsafe(self._view.on_snapshot_written, end_offset)

    def result_callback(
        self, future: asyncio.Future[tuple[ApplyResult | None, int]]
    ) -> ResultCallback:
        """A pysyncobj callback that resolves ``future`` on the loop."""

        def resolve(outcome: tuple[ApplyResult | None, int]) -> None:
            if not future.done():
                future.set_result(outcome)

        def callback(result: ApplyResult | None, fail_reason: int) -> None:
            # RuntimeError: the loop closed while shutting down; nobody waits any more.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(resolve, (result, fail_reason))

        return callback
