"""The queue between a Kafka connection's reader and its writer (``broker.network``).

Like ``asyncio.Queue`` (unbounded, one consumer), but the writer can look at the entries behind
the one it took without taking them, and the reader can queue every request of one read before
it wakes the writer: responses that are then all complete leave in one write
(``broker.network._Connection._write_ready``), one system call for a pipelining client's many
answers instead of one each. Besides the requests, the entries the reader and the broker queue
for the writer: a SASL answer, the end of input, a failure (each closes the connection).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Iterator
from typing import Generic, TypeVar

import attrs

from pykraft.broker.metrics import CloseReason
from pykraft.protocol.segments import Segments

T = TypeVar("T")


class Entry(enum.Enum):
    END_OF_INPUT = "end_of_input"


@attrs.frozen
class Answer:
    """A response the SASL authenticator already built (written as it is)."""

    response: Segments


@attrs.frozen
class Failure:
    """The connection closes here, after the responses queued before."""

    reason: CloseReason
    message: str


class WriterQueue(Generic[T]):
    """FIFO for one consumer task; ``put`` never blocks."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        # Invariant: not None only while the consumer waits in ``get`` on an empty queue.
        self._waiter: asyncio.Future[None] | None = None

    def put(self, item: T, *, wake: bool = True) -> None:
        """Append; ``wake=False`` leaves a waiting consumer asleep until ``wake``: the producer
        is adding more before it suspends, and the consumer then finds them all at once."""
        self._items.append(item)
        if wake:
            self.wake()

    def wake(self) -> None:
        """Resume the consumer if it waits and there is something to take."""
        waiter = self._waiter
        if waiter is not None and self._items:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def get(self) -> T:
        while not self._items:
            assert self._waiter is None, "one consumer only"
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def peek(self) -> T | None:
        """The next entry ``get`` would return, left in place (None when empty)."""
        return self._items[0] if self._items else None

    def take(self) -> T:
        """The next entry, which must exist (after ``peek``)."""
        return self._items.popleft()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[T]:
        """The entries queued, first first (not to be changed while iterated)."""
        return iter(self._items)
