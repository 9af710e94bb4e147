"""Log dirs and controller metadata dirs written by the project's own code, for export tests.

Segments are written by ``storage.partition_log.PartitionLog`` (small ``segment.bytes`` so every
partition has several segments) with batches from ``storage.records.build_batch`` in all four
codecs; checkpoints by ``storage.checkpoints``. Snapshots are written by
``metadata.snapshot.write_snapshot``; the Raft journal by pysyncobj's own ``FileJournal`` with
blobs from ``quorum.raft_batch`` and a dump from ``quorum.raft_dump``, as a controller writes them.
The expected rows come from the project's readers (``storage.records.iter_records``,
``metadata.snapshot.read_snapshot``, ``quorum.raft_state.apply_entry``), never from export/.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import attrs
from pysyncobj.journal import FileJournal
from pysyncobj.pickle import dumps as pysyncobj_dumps

from pykraft.export.export_topic_job import ExportResult, export_topic
from pykraft.metadata.codec import encode_record
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    BrokerEndpoint,
    ClientQuotaEntityData,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    uuid_to_kafka_string,
)
from pykraft.metadata.snapshot import read_snapshot, write_snapshot
from pykraft.quorum import raft_batch
from pykraft.quorum.raft_batch import ProposedBatch, encode_batch
from pykraft.quorum.raft_dump import DumpHeader, RaftEntry, write_dump
from pykraft.quorum.raft_state import MetadataState, apply_entry
from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import BatchHeader, CompressionType, iter_batches
from pykraft.storage.records import (
    ControlRecordType,
    Header,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    iter_records,
)
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock

BASE_MS = 1_700_000_000_000
CODECS = tuple(CompressionType)


# ------------------------------------------------------------------------------ log dirs


@attrs.frozen
class LogFixture:
    log_dirs: tuple[Path, ...]
    # partition -> (directory, log start offset, high watermark, log end offset)
    partitions: dict[TopicPartition, tuple[Path, int, int, int]]

    @property
    def log_dirs_option(self) -> str:
        return ",".join(str(d) for d in self.log_dirs)


def export_now(spark: Any, log_dirs: str, topic: str, out: Path) -> ExportResult:
    """``export_topic`` with its runs dated on a fake clock."""
    return export_topic(spark, log_dirs, topic, out, wall_clock_ms=FakeClock().wall_clock_ms)


def append_and_commit(logs: LogFixture, tp: TopicPartition, count: int) -> None:
    """More records on ``tp`` and a high watermark at the new log end, as a broker would."""
    directory = logs.partitions[tp][0]
    log = PartitionLog.open(directory, LogConfig(segment_bytes=600))
    for n in range(count):
        batch = build_batch(
            [SimpleRecord(value=f"new {n}".encode(), timestamp=BASE_MS + n)],
            compression=CompressionType.LZ4,
        )
        log.append_as_leader(bytearray(batch), 4, BASE_MS + n)
    log.update_high_watermark(log.log_end_offset)
    hw = log.high_watermark
    log.flush()
    log.close()
    checkpoint = directory.parent / REPLICATION_CHECKPOINT
    offsets = read_offset_checkpoint(checkpoint)
    offsets[tp] = hw
    write_offset_checkpoint(checkpoint, offsets)
    logs.partitions[tp] = (directory, logs.partitions[tp][1], hw, hw)


def _records(tp: TopicPartition, batch: int, count: int) -> list[SimpleRecord]:
    out = []
    for i in range(count):
        n = batch * 100 + i
        key = None if n % 4 == 0 else f"{tp}-key-{n}".encode()
        headers = (Header("trace", f"t{n}".encode()), Header("empty", None)) if n % 3 == 0 else ()
        value = None if n % 11 == 5 else (f"{tp} value {n} ".encode() * (1 + n % 5))
        out.append(SimpleRecord(value=value, key=key, timestamp=BASE_MS + n * 7, headers=headers))
    return out


def write_partition(
    directory: Path, tp: TopicPartition, batches: int, *, transactional: bool = False
) -> PartitionLog:
    """A partition log with ``batches`` batches over all codecs and two leader epochs."""
    log = PartitionLog.open(directory, LogConfig(segment_bytes=600))
    codecs = itertools.cycle(CODECS)
    for batch in range(batches):
        epoch = 0 if batch < batches // 2 else 3
        data = build_batch(_records(tp, batch, 1 + batch % 4), compression=next(codecs))
        log.append_as_leader(bytearray(data), epoch, BASE_MS + batch)
    if transactional:
        data = build_batch(
            _records(tp, batches, 2),
            producer_id=7,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        log.append_as_leader(bytearray(data), 3, BASE_MS + batches)
        marker = build_control_batch(
            ControlRecordType.COMMIT,
            producer_id=7,
            producer_epoch=0,
            timestamp=BASE_MS + batches + 1,
        )
        log.append_as_leader(
            bytearray(marker), 3, BASE_MS + batches + 1, origin=AppendOrigin.COORDINATOR
        )
    return log


def build_log_dirs(root: Path) -> LogFixture:
    """Two log dirs: orders-0/1 in a, orders-2 and audit-log-0 in b, with checkpoints."""
    dirs = (root / "logs-a", root / "logs-b")
    layout = {
        TopicPartition("orders", 0): (dirs[0], 14, "hw-below-end"),
        TopicPartition("orders", 1): (dirs[0], 9, "deleted-records"),
        TopicPartition("orders", 2): (dirs[1], 11, "transactional"),
        TopicPartition("audit-log", 0): (dirs[1], 6, "no-checkpoint"),
    }
    partitions: dict[TopicPartition, tuple[Path, int, int, int]] = {}
    high_watermarks: dict[Path, dict[TopicPartition, int]] = {d: {} for d in dirs}
    log_starts: dict[Path, dict[TopicPartition, int]] = {d: {} for d in dirs}
    for tp, (log_dir, batches, kind) in layout.items():
        log = write_partition(
            log_dir / tp.dir_name(), tp, batches, transactional=kind == "transactional"
        )
        end = log.log_end_offset
        hw = end - 3 if kind == "hw-below-end" else end
        log.update_high_watermark(hw)
        start = log.delete_records(5) if kind == "deleted-records" else 0
        log.flush()
        log.close()
        if kind != "no-checkpoint":
            high_watermarks[log_dir][tp] = hw
        else:
            hw = 0  # no entry: Kafka starts the high watermark at 0
        log_starts[log_dir][tp] = start
        partitions[tp] = (log_dir / tp.dir_name(), start, hw, end)
    for log_dir in dirs:
        write_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT, high_watermarks[log_dir])
        write_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT, log_starts[log_dir])
    # A partition being deleted and a stray file: both ignored, as Kafka's LogManager does.
    (dirs[0] / "orders-9.0123456789abcdef-delete").mkdir()
    (dirs[0] / "meta.properties").write_text("node.id=1\n")
    return LogFixture(dirs, partitions)


def expected_log_rows(
    fixture: LogFixture, *, ignore_high_watermark: bool = False
) -> list[tuple[object, ...]]:
    """Rows read with storage.records.iter_records: every non-control record the scan owes."""
    rows = []
    for tp, (directory, start, hw, end) in sorted(fixture.partitions.items()):
        upper = end if ignore_high_watermark else hw
        for segment in sorted(directory.glob("*.log")):
            data = segment.read_bytes()
            for position, header in iter_batches(data):
                if header.is_control:
                    continue
                for record in iter_records(data, position):
                    if start <= record.offset < upper:
                        rows.append(log_row(tp, record, header))
    return rows


def log_row(tp: TopicPartition, record: Record, header: BatchHeader) -> tuple[object, ...]:
    return (
        tp.topic,
        tp.partition,
        record.offset,
        record.timestamp,
        header.timestamp_type.value,
        record.key,
        record.value,
        tuple((h.key, h.value) for h in record.headers),
        header.partition_leader_epoch,
        header.producer_id,
        header.producer_epoch,
        header.is_transactional,
    )


# ------------------------------------------------------------------------- metadata dirs


def topic_id(name: str) -> str:
    return uuid_to_kafka_string(name.encode().ljust(16, b"\x02")[:16])


def _broker(
    broker_id: int, *, fenced: bool = False, rack: str | None = None
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid_to_kafka_string(bytes([broker_id]) * 16),
        broker_epoch=100 + broker_id,
        fenced=fenced,
        rack=rack,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id),),
    )


def cluster_records(partitions_per_topic: int = 4) -> list[MetadataRecord]:
    """Four brokers (4 fenced), two topics, one under-replicated and one offline partition."""
    records: list[MetadataRecord] = [
        FeatureLevelRecord(name="metadata.version", feature_level=20),
        _broker(1, rack="r1"),
        _broker(2, rack="r2"),
        _broker(3),
        _broker(4, fenced=True),
    ]
    for name, replication_factor in (("orders", 3), ("payments", 2)):
        records.append(TopicRecord(name=name, topic_id=topic_id(name)))
        for p in range(partitions_per_topic):
            replicas = tuple(1 + (p + i) % 3 for i in range(replication_factor))
            isr, leader = replicas, replicas[0]
            if name == "payments" and p == 1:
                isr = replicas[:1]  # under-replicated
            if name == "payments" and p == 2:
                isr, leader = (), -1  # offline
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id(name),
                    replicas=replicas,
                    isr=isr,
                    leader=leader,
                    leader_epoch=p,
                    partition_epoch=2 * p,
                )
            )
    records += [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="orders",
            name="retention.ms",
            value="3600000",
        ),
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="1",
            name="log.retention.bytes",
            value="1048576",
        ),
        # KIP-546: a struct list with a null name (the default user) and a float64 value.
        ClientQuotaRecord(
            entity=(
                ClientQuotaEntityData(entity_type="client-id", entity_name="app"),
                ClientQuotaEntityData(entity_type="user", entity_name=None),
            ),
            key="producer_byte_rate",
            value=1048576.0,
        ),
    ]
    return records


def journal_batches() -> list[list[MetadataRecord]]:
    orders = topic_id("orders")
    return [
        [PartitionChangeRecord(partition_id=0, topic_id=orders, isr=(1, 2))],
        [
            PartitionChangeRecord(partition_id=0, topic_id=orders, isr=(1, 2, 3)),
            PartitionChangeRecord(partition_id=1, topic_id=orders, leader=3),
        ],
        [
            FenceBrokerRecord(id=3, epoch=103),
            PartitionChangeRecord(partition_id=2, topic_id=orders, isr=(1, 2), leader=1),
        ],
        [UnfenceBrokerRecord(id=3, epoch=103)],
    ]


@attrs.frozen
class MetadataFixture:
    metadata_dir: Path
    snapshot_paths: tuple[Path, ...]
    commit_index: int


def _command(blob: bytes) -> bytes:
    # pysyncobj journals a replicated call as byte 0 + pickle((function id, [args])).
    return b"\x00" + bytes(pysyncobj_dumps((0, [blob])))


def build_metadata_dir(root: Path, partitions_per_topic: int = 4) -> MetadataFixture:
    """snapshots/ with two snapshots and raft/ with a dump and a journal continuing after it."""
    snapshots = root / "snapshots"
    raft = root / "raft"
    snapshots.mkdir(parents=True)
    raft.mkdir()
    records = cluster_records(partitions_per_topic)
    first = apply_records(MetadataImage.EMPTY, records[:5], offset=4, epoch=1)
    path_a = write_snapshot(snapshots, first, BASE_MS)
    image = apply_records(first, records[5:], offset=len(records) - 1, epoch=2)
    path_b = write_snapshot(snapshots, image, BASE_MS + 60_000)
    entry = RaftEntry(command=b"\x01", index=5, term=2)
    write_dump(
        raft / "dump.bin",
        DumpHeader(
            next_offset=len(records),
            last_raft_index=5,
            epoch=2,
            last_entry=entry,
            prev_entry=entry,
            voters=("127.0.0.1:1",),
            checkpoint_name=path_b.name,
            checkpoint_size=path_b.stat().st_size,
        ),
        path_b,
    )
    commit_index = _write_journal(raft / "journal.bin", len(records) - 1)
    return MetadataFixture(root, (path_a, path_b), commit_index)


def _blob(
    records: list[MetadataRecord], last_offset: int, append_time_ms: int, *, compact: bool
) -> bytes:
    """A Raft entry as the controller proposes it: format 2 (compact payload) where this
    tree's quorum code has it, else format 1 (JSON lines)."""
    if compact and hasattr(raft_batch, "CompactBatch"):
        from pykraft.metadata import compact_codec  # type: ignore[attr-defined, unused-ignore]

        return raft_batch.encode_batch(
            raft_batch.CompactBatch(
                expected_last_offset=last_offset,
                epoch=3,
                append_time_ms=append_time_ms,
                record_count=len(records),
                payload=compact_codec.encode_records(records),
            )
        )
    return encode_batch(
        ProposedBatch(
            expected_last_offset=last_offset,
            epoch=3,
            append_time_ms=append_time_ms,
            records=tuple(encode_record(r).encode() for r in records),
        )
    )


def _write_journal(path: Path, last_offset: int) -> int:
    """Entries 4..: already-applied, no-op, good, stale, invalid and uncommitted batches."""
    journal = FileJournal(str(path))
    batches = journal_batches()
    stale = encode_batch(
        ProposedBatch(
            expected_last_offset=last_offset - 1,
            epoch=3,
            append_time_ms=BASE_MS,
            records=(encode_record(batches[3][0]).encode(),),
        )
    )
    entries: list[bytes] = [_command(stale), b"\x01"]  # indexes 4, 5: before the dump
    for number, batch in enumerate(batches):
        blob = _blob(batch, last_offset, BASE_MS + 1000 * number, compact=number == 1)
        entries.append(_command(blob))
        if number == 0:
            entries.append(b"\x01")  # a pysyncobj no-op
            entries.append(_command(stale))  # computed against an older image
            bad = PartitionChangeRecord(partition_id=0, topic_id=topic_id("nope"), isr=(1,))
            entries.append(
                _command(
                    encode_batch(
                        ProposedBatch(
                            expected_last_offset=last_offset + 1,
                            epoch=3,
                            append_time_ms=BASE_MS,
                            records=(encode_record(bad).encode(),),
                        )
                    )
                )
            )  # replay fails: rejected
        last_offset += len(batch)
    for index, command in enumerate(entries, start=4):
        journal.add(command, index, 3)
    commit_index = 4 + len(entries) - 2  # the last batch is not committed yet
    journal.setRaftCommitIndex(commit_index)
    journal.onOneSecondTimer()
    journal._destroy()
    return commit_index


def build_fresh_metadata_dir(root: Path, partitions_per_topic: int = 4) -> Path:
    """A fresh controller's metadata.log.dir: every record still in the Raft journal, no
    snapshot and no dump yet (a controller writes its first after 20,000 records). The image
    at its end is ``apply_records(EMPTY, cluster_records(…) + journal batches)``."""
    raft = root / "raft"
    raft.mkdir(parents=True)
    records = cluster_records(partitions_per_topic)
    batches = [records[n : n + 5] for n in range(0, len(records), 5)] + journal_batches()
    journal = FileJournal(str(raft / "journal.bin"))
    journal.add(b"\x01", 1, 1)  # the leader's no-op
    next_offset = 0
    for index, batch in enumerate(batches, start=2):
        blob = _blob(batch, next_offset - 1, BASE_MS + index, compact=False)
        journal.add(_command(blob), index, 1)
        next_offset += len(batch)
    journal.setRaftCommitIndex(len(batches) + 1)
    journal.onOneSecondTimer()
    journal._destroy()
    return root


def expected_log_records(fixture: MetadataFixture) -> list[tuple[int, int, int, str]]:
    """(offset, epoch, append_time_ms, record line) per committed record, by apply_entry."""
    journal = FileJournal(str(fixture.metadata_dir / "raft" / "journal.bin"))
    header, records = read_snapshot(fixture.snapshot_paths[-1])
    image = apply_records(
        MetadataImage.EMPTY, records, offset=header.end_offset - 1, epoch=header.epoch
    )
    state = MetadataState(image=image, next_offset=header.end_offset, last_raft_index=5)
    out = []
    for i in range(len(journal)):
        command, index, _ = journal[i]
        if index > fixture.commit_index or command[:1] != b"\x00":
            continue
        from pysyncobj.pickle import loads

        _, (blob,) = loads(command[1:])
        applied = apply_entry(state, index, blob)
        state = applied.state
        if applied.batch is not None:
            for n, raw in enumerate(applied.batch.records):
                # Older quorum code keeps the JSON lines, newer the decoded records.
                line = raw.decode() if isinstance(raw, bytes) else encode_record(raw)
                out.append(
                    (
                        applied.batch.base_offset + n,
                        applied.batch.epoch,
                        applied.batch.append_time_ms,
                        line,
                    )
                )
    journal._destroy()
    return out
