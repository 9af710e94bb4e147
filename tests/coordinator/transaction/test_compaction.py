"""``__transaction_state`` is compacted (``TransactionStateManager.transactionTopicConfigs``:
cleanup.policy=compact): after the cleaner runs, the log holds the latest value per
transactional id and replays to exactly the ids it held before; an expired id's tombstone
(``TransactionStateManager.removeExpiredTransactionalIds`` writes a null value) removes it and
then goes itself after delete.retention.ms (Kafka's LogCleanerTest tombstone cases). The cleaner
does not know the topic: this only checks that the coordinator's records compact as it expects.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pykraft.coordinator.transaction.loader import load_transactions
from pykraft.coordinator.transaction.records import (
    TransactionLogValue,
    encode_value,
    transaction_log_key,
)
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.partition_log import PartitionLog
from tests.storage.cleaner_support import CONFIG, append, clean, open_log, rows

T0 = 1_700_000_000_000
STATES = TransactionState


def value(producer_id: int, epoch: int, state: TransactionState, at_ms: int) -> bytes:
    partitions = None if state is STATES.EMPTY else (("pets", (0, 1)),)
    return encode_value(
        TransactionLogValue(
            producer_id=producer_id,
            producer_epoch=epoch,
            transaction_timeout_ms=60_000,
            transaction_status=state,
            transaction_partitions=partitions,
            transaction_last_update_timestamp_ms=at_ms,
            transaction_start_timestamp_ms=at_ms,
        )
    )


def write(log: PartitionLog, transactional_id: str, data: bytes | None) -> None:
    append(log, [(transaction_log_key(transactional_id), data)], T0)


def loaded(log: PartitionLog) -> dict[str, tuple[int, int, TransactionState]]:
    replay = asyncio.run(load_transactions(log))
    assert replay.problems == []
    return {
        tid: (v.producer_id, v.producer_epoch, v.transaction_status)
        for tid, v in replay.values.items()
    }


def test_a_compacted_transaction_log_keeps_the_latest_state_per_transactional_id(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "__transaction_state-0")
    for i, state in enumerate([STATES.EMPTY, STATES.ONGOING, STATES.PREPARE_COMMIT]):
        write(log, "payments", value(7, 0, state, T0 + i))
    write(log, "audit", value(8, 3, STATES.ONGOING, T0))
    write(log, "payments", value(7, 0, STATES.COMPLETE_COMMIT, T0 + 3))
    write(log, "expired", value(9, 0, STATES.EMPTY, T0))
    write(log, "audit", value(8, 3, STATES.PREPARE_ABORT, T0 + 1))
    write(log, "expired", None)  # removeExpiredTransactionalIds
    write(log, "audit", value(8, 3, STATES.COMPLETE_ABORT, T0 + 2))
    log.roll(T0)
    write(log, "payments", value(7, 1, STATES.EMPTY, T0 + 4))  # the active segment: not cleaned
    before = loaded(log)
    assert before == {
        "payments": (7, 1, STATES.EMPTY),
        "audit": (8, 3, STATES.COMPLETE_ABORT),
    }

    assert clean(log, T0) is not None
    kept = [(offset, key) for offset, key, _ in rows(log)]
    # The latest of each id below the active segment, the tombstone until its horizon passes.
    assert kept == [
        (4, transaction_log_key("payments")),
        (7, transaction_log_key("expired")),
        (8, transaction_log_key("audit")),
        (9, transaction_log_key("payments")),
    ]
    assert loaded(log) == before

    # Past delete.retention.ms the next cleaning drops the tombstone too.
    write(log, "audit", value(8, 4, STATES.EMPTY, T0 + 5))
    log.roll(T0)
    write(log, "tail", value(10, 0, STATES.EMPTY, T0))
    assert clean(log, T0 + CONFIG.delete_retention_ms + 1) is not None
    keys = [key for _, key, _ in rows(log)]
    assert transaction_log_key("expired") not in keys
    assert loaded(log) == {
        "payments": (7, 1, STATES.EMPTY),
        "audit": (8, 4, STATES.EMPTY),
        "tail": (10, 0, STATES.EMPTY),
    }
    log.close()
