"""MetadataLoader against a fake controller: no ports, no sleeping.

Behaviour follows Kafka's MetadataLoader (metadata/src/main/java/org/apache/kafka/image/loader/
MetadataLoader.java): nothing is published while catching up, every later answer is published
as one delta, a snapshot replaces the image, listeners see (delta, image) in order, and a record
that cannot be replayed is a counted, non-fatal fault on a broker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import (
    MetadataBatch,
    RecordsPage,
    SnapshotRequiredError,
)
from pykraft.broker.metadata_loader import MetadataLoader, MetadataLoadError
from pykraft.metadata.delta import MetadataDelta, apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import local_changes
from pykraft.metadata.records import (
    BrokerEndpoint,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.metadata.snapshot import encode_snapshot
from pykraft.storage.topic_partition import TopicPartition

LOCAL = 1
PETS = "ThIaNwRnSM2Nt9Mx1v0RvA"
BIRDS = "f62ptyETTjet8SL5ZeREiw"


def register(broker_id: int, epoch: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=f"incarnation-{broker_id}",
        broker_epoch=epoch,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id),),
    )


def topic(name: str, topic_id: str, leaders: Sequence[int]) -> list[MetadataRecord]:
    records: list[MetadataRecord] = [TopicRecord(name=name, topic_id=topic_id)]
    for index, leader in enumerate(leaders):
        records.append(
            PartitionRecord(
                topic_id=topic_id,
                partition_id=index,
                replicas=(leader,),
                isr=(leader,),
                leader=leader,
            )
        )
    return records


def batches_of(*groups: list[MetadataRecord], base: int = 0, epoch: int = 1) -> list[MetadataBatch]:
    """Consecutive atomic batches, one per group, from offset ``base``."""
    result = []
    for group in groups:
        result.append(
            MetadataBatch(
                base_offset=base,
                last_offset=base + len(group) - 1,
                epoch=epoch,
                append_time_ms=0,
                records=tuple(group),
            )
        )
        base += len(group)
    return result


class FakeController:
    """The controller's GET /v1/metadata/records over an in-memory log with a window."""

    def __init__(
        self,
        batches: list[MetadataBatch],
        window_start: int = 0,
        snapshot: bytes | None = None,
        snapshot_id: str = "snap",
    ) -> None:
        self.batches = batches
        self.window_start = window_start
        self.snapshot = snapshot
        self.snapshot_id = snapshot_id
        self.requests: list[tuple[int, int]] = []
        self.downloads: list[str] = []

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.window_start

    async def fetch_records(
        self, from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage:
        self.requests.append((from_offset, max_wait_ms))
        if from_offset < self.window_start:
            body = {
                "snapshot": None
                if self.snapshot is None
                else {"id": self.snapshot_id, "end_offset": self.window_start, "epoch": 1}
            }
            raise SnapshotRequiredError(409, "SNAPSHOT_REQUIRED", "below the window", body)
        chosen: list[MetadataBatch] = []
        count = 0
        for batch in self.batches:
            if batch.last_offset < from_offset:
                continue
            if chosen and count + len(batch.records) > max_records:
                break
            chosen.append(batch)
            count += len(batch.records)
        next_offset = chosen[-1].last_offset + 1 if chosen else from_offset
        return RecordsPage(
            from_offset=from_offset,
            next_offset=next_offset,
            log_end_offset=self.log_end_offset,
            batches=tuple(chosen),
        )

    async def download_snapshot(self, snapshot_id: str) -> bytes:
        self.downloads.append(snapshot_id)
        assert self.snapshot is not None
        return self.snapshot


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[MetadataDelta, MetadataImage]] = []

    def __call__(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.calls.append((delta, image))


def poll(loader: MetadataLoader, times: int = 1) -> list[bool]:
    async def go() -> list[bool]:
        return [await loader.poll_once() for _ in range(times)]

    return asyncio.run(go())


def loader_for(
    controller: FakeController, max_records: int = 10_000
) -> tuple[MetadataLoader, Recorder]:
    loader = MetadataLoader(controller, max_records=max_records, max_wait_ms=500)
    recorder = Recorder()
    loader.add_listener(recorder)
    return loader, recorder


def test_an_empty_log_is_caught_up_without_publishing() -> None:
    loader, recorder = loader_for(FakeController([]))
    assert poll(loader) == [False]
    assert loader.caught_up and recorder.calls == [] and loader.image.offset == -1


def test_nothing_is_published_until_the_initial_catch_up() -> None:
    # Kafka's loader stays silent while catchingUp: one delta for everything read meanwhile.
    controller = FakeController(
        batches_of(
            [register(LOCAL, 0)],
            topic("pets", PETS, [1, 1]),
            topic("birds", BIRDS, [2]),
            [NoOpRecord()],
        )
    )
    loader, recorder = loader_for(controller, max_records=1)
    assert poll(loader, 3) == [False, False, False]
    assert recorder.calls == [] and not loader.caught_up
    assert poll(loader) == [True]
    ((delta, image),) = recorder.calls
    assert image.offset == 6 and image.epoch == 1
    assert set(delta.topics.created_topic_ids) == {PETS, BIRDS}
    assert set(local_changes(delta, LOCAL).leaders) == {
        TopicPartition("pets", 0),
        TopicPartition("pets", 1),
    }
    # While behind, the loader never waits on the long poll.
    assert [wait for _, wait in controller.requests] == [500, 0, 0, 0]


def test_after_catch_up_each_answer_is_one_published_delta_in_order() -> None:
    controller = FakeController(batches_of([register(LOCAL, 0)]))
    loader, recorder = loader_for(controller)
    second = Recorder()
    loader.add_listener(second)
    assert poll(loader) == [True]
    controller.batches += batches_of(topic("pets", PETS, [1]), [NoOpRecord()], base=1, epoch=2)
    assert poll(loader) == [True]
    controller.batches += batches_of(
        [PartitionChangeRecord(topic_id=PETS, partition_id=0, isr=(1,), leader=1)], base=4, epoch=2
    )
    assert poll(loader) == [True]
    assert [image.offset for _, image in recorder.calls] == [0, 3, 4]
    assert [image.offset for _, image in second.calls] == [0, 3, 4]
    delta, image = recorder.calls[2]
    assert delta.image is recorder.calls[1][1]  # each delta starts from the previous image
    partition = image.topics.get_partition(PETS, 0)
    assert partition is not None and partition.leader_epoch == 1
    assert loader.image is image


def test_before_publish_is_awaited_with_the_delta_before_any_listener_sees_it() -> None:
    # broker.new_logs creates a delta's new logs there, off the event loop: the delta must be
    # the one published next, and nothing may be applied or published while it runs.
    controller = FakeController(batches_of([register(LOCAL, 0)]))
    loader, recorder = loader_for(controller)
    assert poll(loader) == [True]
    seen: list[tuple[MetadataDelta, int, int]] = []

    async def before_publish(delta: MetadataDelta) -> None:
        await asyncio.sleep(0)  # the loop runs other work meanwhile
        seen.append((delta, len(recorder.calls), loader.image.offset))

    loader.before_publish = before_publish
    controller.batches += batches_of(topic("pets", PETS, [LOCAL]), base=1, epoch=2)
    assert poll(loader) == [True]
    ((delta, published_before, image_offset),) = seen
    assert (published_before, image_offset) == (1, 0)
    assert recorder.calls[1][0] is delta
    assert set(local_changes(delta, LOCAL).leaders) == {TopicPartition("pets", 0)}
    assert poll(loader) == [False]  # an idle poll: nothing to publish, no call
    assert len(seen) == 1


def test_an_idle_poll_publishes_nothing() -> None:
    controller = FakeController(batches_of([register(LOCAL, 0)]))
    loader, recorder = loader_for(controller)
    assert poll(loader, 2) == [True, False]
    assert len(recorder.calls) == 1 and controller.requests[-1] == (1, 500)


def test_below_the_window_the_snapshot_is_loaded_then_the_log_after_it() -> None:
    # The controller kept offsets 5.. in memory; offsets 0-4 live only in its snapshot.
    early = [register(LOCAL, 0), *topic("pets", PETS, [1, 2]), NoOpRecord()]
    snapshot_image = apply_records(MetadataImage.EMPTY, early, offset=4, epoch=1)
    controller = FakeController(
        batches_of(topic("birds", BIRDS, [1]), base=5),
        window_start=5,
        snapshot=encode_snapshot(snapshot_image, created_ms=0),
    )
    loader, recorder = loader_for(controller)
    assert poll(loader) == [False]  # the snapshot alone does not say where the log ends
    assert controller.downloads == ["snap"]
    assert poll(loader) == [True]
    ((delta, image),) = recorder.calls
    assert image.offset == 6
    assert set(image.topics.by_name) == {"pets", "birds"}
    assert delta.image is MetadataImage.EMPTY
    assert set(local_changes(delta, LOCAL).leaders) == {
        TopicPartition("pets", 0),
        TopicPartition("birds", 0),
    }
    assert controller.requests == [(0, 500), (5, 0)]


def test_a_snapshot_for_a_broker_far_behind_describes_what_changed() -> None:
    base = apply_records(
        MetadataImage.EMPTY, [register(LOCAL, 0), *topic("pets", PETS, [1])], offset=2, epoch=1
    )
    later = apply_records(base, topic("birds", BIRDS, [1]), offset=9, epoch=1)
    controller = FakeController([], window_start=10, snapshot=encode_snapshot(later, created_ms=0))
    loader = MetadataLoader(controller, image=base)
    recorder = Recorder()
    loader.add_listener(recorder)
    loader.caught_up = True
    assert poll(loader, 2) == [False, True]
    ((delta, image),) = recorder.calls
    assert delta.image is base and image.offset == 9
    assert set(local_changes(delta, LOCAL).leaders) == {TopicPartition("birds", 0)}


def test_a_record_that_cannot_be_replayed_is_counted_and_skipped() -> None:
    # A PartitionRecord for a topic nobody created: Kafka's broker logs a metadata-loading
    # fault, bumps a metric and carries on.
    orphan = PartitionRecord(topic_id=BIRDS, partition_id=0, replicas=(1,), isr=(1,), leader=1)
    controller = FakeController(batches_of([register(LOCAL, 0), orphan], topic("pets", PETS, [1])))
    loader, recorder = loader_for(controller)
    assert poll(loader) == [True]
    assert loader.load_errors == 1
    image = recorder.calls[0][1]
    assert image.offset == 3 and set(image.topics.by_name) == {"pets"}


def test_a_batch_straddling_the_next_offset_is_not_replayed_twice() -> None:
    controller = FakeController(batches_of([register(LOCAL, 0), *topic("pets", PETS, [1])]))
    loader, _ = loader_for(controller)
    assert poll(loader) == [True]
    controller.batches += batches_of([NoOpRecord()], base=3)
    original = controller.fetch_records

    async def from_batch_start(
        from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage:
        # A controller may answer with whole batches from before the asked-for offset.
        return await original(0, max_wait_ms=max_wait_ms, max_records=max_records)

    controller.fetch_records = from_batch_start  # type: ignore[method-assign]
    assert poll(loader) == [True]
    assert loader.load_errors == 0 and loader.image.offset == 3


def test_no_snapshot_offered_is_a_load_error() -> None:
    loader, _ = loader_for(FakeController([], window_start=5))
    with pytest.raises(MetadataLoadError, match="offers no snapshot"):
        poll(loader)


def test_a_corrupt_snapshot_is_a_load_error_naming_the_line() -> None:
    image = apply_records(MetadataImage.EMPTY, [register(LOCAL, 0)], offset=4, epoch=1)
    data = bytearray(encode_snapshot(image, created_ms=0))
    data[data.index(b"incarnation-1")] ^= 0x20
    loader, _ = loader_for(FakeController([], window_start=5, snapshot=bytes(data)))
    with pytest.raises(MetadataLoadError, match=r"snapshot snap, line \d+: checksum mismatch"):
        poll(loader)


class FailingController(FakeController):
    def __init__(self, failures: int) -> None:
        super().__init__(batches_of([register(LOCAL, 0)]))
        self.failures = failures

    async def fetch_records(
        self, from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage:
        if self.failures:
            self.failures -= 1
            raise ControllerError("REQUEST_TIMED_OUT", "no controller answered")
        return await super().fetch_records(
            from_offset, max_wait_ms=max_wait_ms, max_records=max_records
        )


def test_run_backs_off_after_failures_and_stops_when_asked() -> None:
    controller = FailingController(failures=3)
    loader, recorder = loader_for(controller)
    delays: list[float] = []

    async def scenario() -> None:
        stop = asyncio.Event()

        async def fake_sleep(seconds: float) -> None:
            delays.append(seconds)

        def stop_after_publish(delta: MetadataDelta, image: MetadataImage) -> None:
            stop.set()

        loader.add_listener(stop_after_publish)
        await asyncio.wait_for(
            loader.run(stop, sleep=fake_sleep, on_failure=lambda: calls_in.append(len(delays))),
            timeout=5,
        )

    calls_in: list[int] = []
    asyncio.run(scenario())
    assert delays == sorted(delays) and len(delays) == 3 and delays[0] > 0
    assert len(recorder.calls) == 1
    # Every failed poll asks the heartbeat to call in before the back-off sleep.
    assert calls_in == [0, 1, 2]
