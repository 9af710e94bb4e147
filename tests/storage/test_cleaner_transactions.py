"""The cleaner and transactions, against a model: whatever interleaving of plain writes and
committed or aborted transactions (several producers, transactions spanning segments), what a
read_committed reader sees as each key's latest value is the same before and after cleaning,
and after a second cleaning once ``delete.retention.ms`` has passed (markers gone). Kafka's
LogCleanerTest transaction cases (testCleanWithTransactionsSpanningSegments,
testAbortedTransactionSpanningSegments, testCommitMarkerRetentionWithEmptyBatch) in one
property."""

from __future__ import annotations

import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, given, settings

from pykraft.storage.cleaner_batches import read_batch
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.txn_markers import decode_end_txn_marker
from tests.storage.cleaner_support import CONFIG, append, append_marker, batches, clean, open_log

T0 = 1_000_000
PRODUCERS = (None, 100, 101, 102)  # None: a plain, non-transactional write
# (producer, key, value, then end its transaction: None = stay open, True commit, False abort)
OP = st.tuples(
    st.sampled_from(PRODUCERS),
    st.sampled_from([b"a", b"b", b"c", b"d"]),
    st.binary(min_size=1, max_size=30),
    st.sampled_from([None, None, True, False]),
)


def committed_latest(log: PartitionLog) -> dict[bytes | None, bytes | None]:
    """Each key's latest value as a read_committed consumer sees it: a transaction's data only
    once its COMMIT marker follows it (unmarked data is not yet visible, and the data of the
    aborted transactions the log lists, Kafka's fetch ``AbortedTransactions``, never is)."""
    aborted = log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset)
    latest: dict[bytes | None, tuple[int, bytes | None]] = {}
    pending: dict[int, list[tuple[int, bytes | None, bytes | None]]] = {}
    for header, data in batches(log):
        records = read_batch(data)[1]
        if header.is_control:
            marker = decode_end_txn_marker(data) if records else None
            done = pending.pop(header.producer_id, [])
            if marker is not None and not marker.is_abort:
                for offset, key, value in done:
                    latest[key] = max(latest.get(key, (-1, None)), (offset, value))
            continue
        for record in records:
            if header.is_transactional and any(
                txn.producer_id == header.producer_id
                and txn.first_offset <= record.offset <= txn.last_offset
                for txn in aborted
            ):
                continue
            row = (record.offset, record.key, record.value)
            if header.is_transactional:
                pending.setdefault(header.producer_id, []).append(row)
            else:
                latest[record.key] = (record.offset, record.value)
    return {key: value for key, (_, value) in latest.items()}


def follower_copy(log: PartitionLog, directory: Path) -> PartitionLog:
    """A replica fetching ``log`` from offset 0 onto an empty log, its high watermark moved to
    its end: every transaction it replays must be closed (LSO == HW)."""
    follower = open_log(directory)
    follower.append_as_follower(log.read(0, 10**7, log.log_end_offset).read_bytes(), T0)
    follower.update_high_watermark(follower.log_end_offset)
    return follower


def write(log: PartitionLog, ops: list[tuple[int | None, bytes, bytes, bool | None]]) -> None:
    sequences: dict[int, int] = {}
    open_txns: set[int] = set()
    for number, (producer, key, value, end) in enumerate(ops):
        if number % 7 == 6:
            log.roll(T0)  # small segments: transactions span them
        if producer is None:
            append(log, [(key, value)], T0)
            continue
        sequence = sequences.get(producer, 0)
        append(
            log,
            [(key, value)],
            T0,
            producer_id=producer,
            producer_epoch=0,
            base_sequence=sequence,
            is_transactional=True,
        )
        sequences[producer] = sequence + 1
        open_txns.add(producer)
        if end is not None:
            append_marker(log, producer, commit=end, now_ms=T0)
            open_txns.discard(producer)
    for producer in sorted(open_txns):
        append_marker(log, producer, commit=True, now_ms=T0)
    log.roll(T0)
    append(log, [(b"tail", b"t")], T0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OP, min_size=1, max_size=40), capacity=st.integers(2, 20))
def test_read_committed_view_survives_cleaning(
    ops: list[tuple[int | None, bytes, bytes, bool | None]], capacity: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(Path(directory) / "t-0")
        write(log, ops)
        expected = committed_latest(log)
        first = clean(log, T0, capacity=capacity)
        assert committed_latest(log) == expected
        checkpoint = 0 if first is None else first.end_offset
        clean(log, T0 + CONFIG.delete_retention_ms, checkpoint=checkpoint, capacity=capacity)
        clean(log, T0 + 2 * CONFIG.delete_retention_ms, capacity=10_000)
        assert committed_latest(log) == expected
        log.close()
        reopened = PartitionLog.open(Path(directory) / "t-0", CONFIG)
        assert committed_latest(reopened) == expected, "the same after a restart"
        follower = follower_copy(reopened, Path(directory) / "f-0")
        assert follower.last_stable_offset == follower.high_watermark, "no marker lost"
        assert committed_latest(follower) == expected
        follower.close()
        reopened.close()


def test_commit_marker_stays_while_its_data_stays_in_an_earlier_group() -> None:
    """The transaction's data fills one group and its COMMIT marker opens the next: the marker
    must stay as long as the data does (Kafka keeps one CleanedTransactionMetadata for the
    whole cleaning, Cleaner.doClean; LogCleanerTest.testCleanWithTransactionsSpanningSegments).
    A replica copying the cleaned log from zero then finds no open transaction."""
    with tempfile.TemporaryDirectory() as directory:
        log = open_log(Path(directory) / "t-0")
        txn = {"producer_id": 9, "producer_epoch": 0, "base_sequence": 0}
        append(log, [(b"a", b"x" * 700)], T0, is_transactional=True, **txn)
        log.roll(T0)
        append_marker(log, 9, commit=True, now_ms=T0)
        append(log, [(b"b", b"y" * 600)], T0)
        log.roll(T0)
        append(log, [(b"z", b"z")], T0)
        for round_number in range(3):
            clean(log, T0 + round_number * 5 * CONFIG.delete_retention_ms, checkpoint=0)
        controls = [header.base_offset for header, _ in batches(log) if header.is_control]
        assert controls == [1]
        assert committed_latest(log) == {b"a": b"x" * 700, b"b": b"y" * 600, b"z": b"z"}
        follower = follower_copy(log, Path(directory) / "f-0")
        assert follower.last_stable_offset == follower.high_watermark == 4
        follower.close()
        log.close()
