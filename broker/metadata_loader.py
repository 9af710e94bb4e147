"""MetadataLoader: the broker's copy of the metadata log, applied to a ``MetadataImage``.

Theory of operation (Kafka's ``MetadataLoader``; DESIGN.md §3.1)
---------------------------------------------------------------
Brokers are not Raft members. The loader long-polls ``GET /v1/metadata/records?from=N`` and
replays every committed record, at its offset and epoch, into a ``MetadataDelta`` based on the
last published image. Below the controller's retained window the answer is SNAPSHOT_REQUIRED:
the loader downloads the latest snapshot, turns it into an image, and continues from the
snapshot's end offset (its records are then described to listeners as
``MetadataDelta.between(published image, new image)``).

Publishing hands ``(delta, image)`` to each listener, in registration order, synchronously and
always in log order. Two rules from Kafka decide when:

* **Initial catch-up**: nothing is published until the loader has read up to the log end offset
  the controller reported (Kafka's loader stays silent while ``catchingUp``), so a restarting
  broker never acts on a half-replayed log — say, leading a partition it lost a minute ago.
* **Afterwards**, every answer that carried records is published at once as one delta. An answer
  holds whole atomic batches only, so no listener ever sees half of a batch.

A record that cannot be replayed (``MetadataReplayError``) is logged, counted in
``load_errors`` and skipped; the image still advances to its offset. This is Kafka's broker
behaviour (a non-fatal metadata-loading fault that bumps a metric) rather than a crash loop.
The offset the broker reports in heartbeats is ``image.offset``, the last applied one.

``on_page`` replays one records answer and publishes when due (synchronous: the replication
simulation delivers its pages through it); ``poll_once`` does one request and ``on_page``;
``run`` repeats it until stopped, backing off after failures (transport retries across
controllers happen inside the client).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import RecordsPage, SnapshotRef, SnapshotRequiredError
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.snapshot import SnapshotError, decode_snapshot, snapshot_to_image

logger = logging.getLogger(__name__)

# Bounds (STYLE.md §7).
# Kafka's KafkaRaftClient fetches with a 500 ms max wait; the controller's NoOpRecord every
# metadata.max.idle.interval.ms (500) ends idle polls about as often anyway.
DEFAULT_MAX_WAIT_MS = 500
DEFAULT_MAX_RECORDS = 10_000
MAX_LISTENERS = 16
BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 2.0

MetadataListener = Callable[[MetadataDelta, MetadataImage], None]
Sleep = Callable[[float], Awaitable[None]]


class MetadataSource(Protocol):
    """What the loader needs from the controllers (``ControllerClient`` provides it)."""

    async def fetch_records(
        self, from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage: ...

    async def download_snapshot(self, snapshot_id: str) -> bytes: ...


class MetadataLoadError(Exception):
    """The metadata log could not be read (no snapshot offered, or a corrupt snapshot)."""


class MetadataLoader:
    def __init__(
        self,
        source: MetadataSource,
        *,
        max_wait_ms: int = DEFAULT_MAX_WAIT_MS,
        max_records: int = DEFAULT_MAX_RECORDS,
        image: MetadataImage = MetadataImage.EMPTY,
    ) -> None:
        self._source = source
        self.max_wait_ms = max_wait_ms
        self.max_records = max_records
        # The last image handed to listeners.
        self.image = image
        # Records read but not yet published; its base is ``image`` unless a snapshot was
        # loaded since (then ``_snapshot_loaded``).
        self._working = MetadataDelta(image)
        self._working_offset = image.offset
        self._working_epoch = image.epoch
        self._snapshot_loaded = False
        # Invariant: once True, stays True (Kafka publishes nothing before the first catch-up).
        self.caught_up = False
        # One past the highest committed offset any controller reported.
        self.log_end_offset = 0
        self.load_errors = 0
        self.publish_count = 0
        self._listeners: list[MetadataListener] = []
        # Awaited by ``poll_once`` before it publishes a delta (not a snapshot's): the broker
        # creates the delta's new logs there off the event loop (``broker.new_logs``).
        self.before_publish: Callable[[MetadataDelta], Awaitable[None]] | None = None

    @property
    def next_offset(self) -> int:
        """The offset the next request asks for."""
        return self._working_offset + 1

    def add_listener(self, listener: MetadataListener) -> None:
        assert len(self._listeners) < MAX_LISTENERS, "bounded listener list"
        self._listeners.append(listener)

    # ------------------------------------------------------------------ one step

    async def poll_once(self, max_wait_ms: int | None = None) -> bool:
        """Read once from ``next_offset`` (waiting up to ``max_wait_ms`` for new records);
        returns whether a new image was published."""
        wait_ms = self.max_wait_ms if max_wait_ms is None else max_wait_ms
        # While catching up, or right after a snapshot, there is more to read: never wait then.
        if self._snapshot_loaded or (not self.caught_up and self.next_offset < self.log_end_offset):
            wait_ms = 0
        try:
            page = await self._source.fetch_records(
                self.next_offset, max_wait_ms=wait_ms, max_records=self.max_records
            )
        except SnapshotRequiredError as required:
            # Published with the records after it: only a records answer says where the log
            # ends, so only then is it known whether the loader has caught up.
            await self._load_snapshot(required.snapshot)
            return False
        self.log_end_offset = max(self.log_end_offset, page.log_end_offset)
        self._replay_page(page)
        if self.before_publish is not None and self._publish_due() and not self._snapshot_loaded:
            # The delta as it will be published; nothing is applied or published meanwhile.
            await self.before_publish(self._working)
        return self._maybe_publish()

    def on_page(self, page: RecordsPage) -> bool:
        """Replay one records answer and publish when due; whether a new image was published."""
        self.log_end_offset = max(self.log_end_offset, page.log_end_offset)
        self._replay_page(page)
        return self._maybe_publish()

    def _replay_page(self, page: RecordsPage) -> None:
        for batch in page.batches:
            for index, record in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset <= self._working_offset:
                    continue  # already applied (a batch that straddles our offset)
                if offset != self._working_offset + 1:
                    logger.warning(
                        "metadata gap: expected offset %d, got %d", self._working_offset + 1, offset
                    )
                try:
                    self._working.replay(record, offset, batch.epoch)
                except MetadataReplayError as error:
                    self.load_errors += 1
                    logger.error("skipping metadata record at offset %d: %s", offset, error)
                self._working_offset, self._working_epoch = offset, batch.epoch

    async def _load_snapshot(self, snapshot: SnapshotRef | None) -> None:
        if snapshot is None:
            raise MetadataLoadError(
                f"offset {self.next_offset} is below the controller's window and it offers "
                "no snapshot"
            )
        data = await self._source.download_snapshot(snapshot.snapshot_id)
        source = snapshot.snapshot_id
        try:
            header, records = decode_snapshot(data, source)
            image = snapshot_to_image(header, records, source)
        except SnapshotError as error:
            raise MetadataLoadError(str(error)) from None
        logger.info(
            "loaded metadata snapshot %s (%d records, end offset %d)",
            snapshot.snapshot_id,
            len(records),
            header.end_offset,
        )
        self._working = MetadataDelta(image)
        self._working_offset, self._working_epoch = image.offset, image.epoch
        self._snapshot_loaded = True

    # ------------------------------------------------------------------ publishing

    def _publish_due(self) -> bool:
        """Whether ``_maybe_publish`` would publish now."""
        if self._working_offset <= self.image.offset and not self._snapshot_loaded:
            return False
        return self.caught_up or self.next_offset >= self.log_end_offset

    def _maybe_publish(self) -> bool:
        if self._working_offset <= self.image.offset and not self._snapshot_loaded:
            if not self.caught_up and self.next_offset >= self.log_end_offset:
                self.caught_up = True  # an empty log: caught up with nothing to publish
            return False
        if not self.caught_up:
            if self.next_offset < self.log_end_offset:
                return False
            self.caught_up = True
            logger.info("caught up with the metadata log at offset %d", self._working_offset)
        self._publish()
        return True

    def _publish(self) -> None:
        image = self._working.apply(offset=self._working_offset, epoch=self._working_epoch)
        delta = MetadataDelta.between(self.image, image) if self._snapshot_loaded else self._working
        for listener in self._listeners:
            listener(delta, image)
        self.image = image
        self.publish_count += 1
        self._working = MetadataDelta(image)
        self._snapshot_loaded = False

    # ------------------------------------------------------------------ the loop

    async def run(
        self,
        stop: asyncio.Event,
        sleep: Sleep = asyncio.sleep,
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        """Poll until ``stop`` is set; failures are logged and retried with back-off.

        ``on_failure`` is called at each failed poll: the broker's heartbeat calls in at once,
        because a poll that failed (timed out, reset) closed its connection, and the active
        controller ends the session ``pykraft.broker.channel.closed.timeout.ms`` after that
        unless this broker calls in — which the retried poll may not do if it goes to a standby
        controller (``quorum/managers/sessions.py``)."""
        failures = 0
        while not stop.is_set():
            try:
                await self.poll_once()
                failures = 0
            except (ControllerError, MetadataLoadError) as error:
                failures += 1
                if on_failure is not None:
                    on_failure()
                delay = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** min(failures, 16))
                if failures == 1 or failures % 20 == 0:
                    logger.warning(
                        "reading the metadata log from offset %d failed (%d in a row): %s",
                        self.next_offset,
                        failures,
                        error,
                    )
                await sleep(delay)
