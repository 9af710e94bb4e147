"""After a truncation the last stable offset is where the kept records put it (Kafka's
``UnifiedLog.truncateTo``: the producer state is rebuilt, then the high watermark updated, so
transactions whose markers are below it are stable again). Found by the transaction simulation
(``tests/sim/test_txn_sim.py``): a leader demoted after appending a marker truncated it away,
and its LSO fell to the first transaction of the log until the high watermark next moved.

Runs on both segment stores, with the helpers of ``test_log_transactions``.
"""

from __future__ import annotations

from pathlib import Path

from tests.storage.test_log_transactions import Producer, end_txn, open_log, store, unstable

__all__ = ["store"]  # the fixture: every case on files and in memory


def test_truncation_keeps_replicated_transactions_stable(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    first, second = Producer(log, 1), Producer(log, 2)
    first(3)  # 0-2
    end_txn(log, 1, commit=True)  # 3
    second(2)  # 4-5
    end_txn(log, 2, commit=False)  # 6
    first(1)  # 7: open
    log.update_high_watermark(8)
    end_txn(log, 1, commit=True)  # 8: not replicated
    assert unstable(log) == (7, 7)
    assert log.truncate_to(8)  # the demoted leader loses its unreplicated marker
    assert unstable(log) == (7, 7)
    assert log.high_watermark == 8


def test_truncation_below_the_log_end_keeps_replicated_transactions_stable(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path)
    producer = Producer(log, 1)
    producer(2)  # 0-1
    end_txn(log, 1, commit=False)  # 2
    producer(2)  # 3-4
    log.update_high_watermark(3)
    end_txn(log, 1, commit=True)  # 5
    producer(1)  # 6
    assert log.truncate_to(6)
    assert unstable(log) == (3, 3)  # the transaction at 3 ended above the high watermark
    log.update_high_watermark(6)
    assert unstable(log) == (None, 6)
