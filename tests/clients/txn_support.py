"""What the transaction client tests share: the markers a broker stored, order checks, waiting.

A transaction's records and its end marker are read back two ways: through a client (what a
read_committed or read_uncommitted consumer sees) and from the segment files (``stored_markers``:
the COMMIT/ABORT control batches every replica wrote, KIP-98's "transaction markers"). Clients
skip control batches, so only the files show that a marker is there and which one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from kafka.admin import KafkaAdminClient
from kafka.admin._transactions import TransactionState

from pykraft.storage.record_batch import iter_batches
from pykraft.storage.txn_markers import decode_end_txn_marker
from tests.clients.conftest import DevCluster
from tests.clients.support import Placed, by_partition

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class StoredMarker:
    """One end-transaction marker as stored: its offset, COMMIT or ABORT, and whose it is."""

    offset: int
    commit: bool
    producer_id: int
    producer_epoch: int


def stored_markers(data_dir: Path, topic: str, partition: int) -> list[StoredMarker]:
    """The markers of ``topic-partition``, read from its segment files; every replica under
    ``data_dir`` must hold the same ones (a follower copies the leader's control batches)."""
    directories = sorted(p for p in data_dir.rglob(f"{topic}-{partition}") if p.is_dir())
    assert directories, f"no replica of {topic}-{partition} under {data_dir}"
    per_replica = [_markers_in(directory) for directory in directories]
    assert all(markers == per_replica[0] for markers in per_replica), per_replica
    return per_replica[0]


def _markers_in(directory: Path) -> list[StoredMarker]:
    markers: list[StoredMarker] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for position, header in iter_batches(data):
            if not header.is_control:
                continue
            assert header.is_transactional, f"control batch not transactional: {header}"
            marker = decode_end_txn_marker(data, position)
            assert marker is not None, f"control batch without a marker: {header}"
            markers.append(StoredMarker(
                offset=header.base_offset, commit=not marker.is_abort,
                producer_id=header.producer_id, producer_epoch=header.producer_epoch,
            ))  # fmt: skip
    return markers


def check_in_offset_order(consumed: Sequence[Placed]) -> None:
    """Within each partition, records came in increasing offset order (KIP-98: a
    read_committed consumer delivers in offset order, holding back only what is undecided)."""
    last: dict[int, int] = {}
    for item in consumed:
        previous = last.get(item.partition, -1)
        assert item.offset > previous, (
            f"partition {item.partition}: offset {item.offset} read after {previous}"
        )
        last[item.partition] = item.offset


def check_exactly(expected: Sequence[Placed], consumed: Sequence[Placed]) -> None:
    """``consumed`` holds exactly ``expected`` (same partitions, offsets, fields), each
    partition in offset order."""
    check_in_offset_order(consumed)
    assert by_partition(consumed) == by_partition(expected), (
        f"read {[(p.partition, p.offset) for p in consumed]}\n"
        f"expected {[(p.partition, p.offset) for p in expected]}"
    )


def wait_until(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll ``condition`` every 100 ms until it returns something truthy; fail naming ``what``
    and the last answer after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = condition()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"{what}: not after {timeout_s}s (last: {answer!r})"
        time.sleep(0.1)


def wait_for_transaction_end(cluster: DevCluster, transactional_id: str, timeout_s: float) -> str:
    """Wait until the coordinator has written every marker of ``transactional_id``'s last
    transaction (DescribeTransactions, KIP-664: CompleteCommit or CompleteAbort), so whatever it
    left pending — a group's offsets, a partition's LSO — is decided. Returns the state.

    A client's commit or abort returns once the coordinator logged PrepareCommit/PrepareAbort
    (Kafka's ``TransactionCoordinator.handleEndTransaction``); the markers follow.
    """
    ended = (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers.split(","))
    try:

        def state() -> str:
            described = admin.describe_transactions([transactional_id])[transactional_id]
            return str(described.state.value) if described.state in ended else ""

        return wait_until(state, timeout_s, f"{transactional_id}'s markers written")
    finally:
        admin.close()
