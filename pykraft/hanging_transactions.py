"""What ``pykraft transactions find-hanging`` decides, and how the tool prints a table (pure).

A transaction *hangs* on a partition when the partition's producer state holds it open (it keeps
the last stable offset, so read_committed consumers, from moving) while its coordinator will
never write its marker — the coordinator has forgotten the producer, or its transaction no
longer lists the partition (KIP-664; a late write after the transaction ended is the classic
cause, which KIP-890 closes). Kafka's ``TransactionsCommand.FindHangingTransactionsCommand``
finds them in three steps, each a function here:

1. ``candidate_open_transactions``: every active producer with an open transaction
   (``currentTransactionStartOffset`` present) whose last write is older than
   ``--max-transaction-timeout`` (a transaction younger than the largest timeout may simply be
   running);
2. the tool maps the candidates' producer ids to transactional ids (ListTransactions filtered
   by producer id, on every broker) and describes those (DescribeTransactions);
3. ``hanging_transactions``: a candidate hangs when no transactional id maps to its producer,
   when the id's coordinator does not know it, or when the described transaction does not list
   the candidate's partition. Note the last rule compares partitions only, as Kafka does: an
   open transaction the coordinator still lists is its to end (by commit, abort or timeout).

``table_lines`` is ``TransactionsCommand.prettyPrintTable``: every column padded to its widest
cell, each cell followed by a tab (the last one too), the header first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import attrs

from pykraft.admin_codec import PartitionProducers, ProducerState, TopicMetadata
from pykraft.admin_codec import TransactionDescription as Description
from pykraft.storage.topic_partition import TopicPartition

T = TypeVar("T")
MS_PER_MINUTE = 60_000
HEADERS = (
    "Topic",
    "Partition",
    "ProducerId",
    "ProducerEpoch",
    "CoordinatorEpoch",
    "StartOffset",
    "LastTimestamp",
    "Duration(min)",
)


@attrs.frozen
class OpenTransaction:
    topic_partition: TopicPartition
    producer_state: ProducerState


def partitions_to_search(
    topics: Mapping[str, TopicMetadata], broker_id: int | None
) -> list[TopicPartition]:
    """Every partition of ``topics``, or (``--broker-id``) those with a replica on the broker."""
    return [
        TopicPartition(name, partition.partition)
        for name, topic in topics.items()
        for partition in topic.partitions
        if broker_id is None or broker_id in partition.replicas
    ]


def candidate_open_transactions(
    producers: Mapping[TopicPartition, PartitionProducers],
    max_transaction_timeout_ms: int,
    now_ms: int,
) -> list[OpenTransaction]:
    """Open transactions whose producer last wrote more than the timeout ago."""
    return [
        OpenTransaction(tp, state)
        for tp, partition in producers.items()
        for state in partition.active_producers
        if state.current_transaction_start_offset is not None
        and now_ms - state.last_timestamp > max_transaction_timeout_ms
    ]


def hanging_transactions(
    candidates: Sequence[OpenTransaction],
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, Description | None],
) -> list[OpenTransaction]:
    """The candidates no coordinator will end (step 3 above)."""
    hanging = []
    for candidate in candidates:
        transactional_id = transactional_ids.get(candidate.producer_state.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None or candidate.topic_partition not in description.topic_partitions:
            hanging.append(candidate)
    return hanging


def transactional_ids_of(
    listings: Iterable[tuple[int, str]], producer_ids: Iterable[int]
) -> dict[int, str]:
    """(producer id, transactional id) pairs -> the map, keeping only the producer ids asked
    for (a broker that ignores the filter adds nothing)."""
    wanted = set(producer_ids)
    return {producer_id: tid for producer_id, tid in listings if producer_id in wanted}


def hanging_rows(hanging: Iterable[OpenTransaction], now_ms: int) -> list[list[str]]:
    return [
        [
            t.topic_partition.topic,
            str(t.topic_partition.partition),
            str(t.producer_state.producer_id),
            str(t.producer_state.producer_epoch),
            str(_or(t.producer_state.coordinator_epoch, -1)),
            str(_or(t.producer_state.current_transaction_start_offset, -1)),
            str(t.producer_state.last_timestamp),
            str((now_ms - t.producer_state.last_timestamp) // MS_PER_MINUTE),
        ]
        for t in hanging
    ]


def table_lines(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [len(header) for header in headers]
    for row in rows:
        assert len(row) == len(headers), f"a row of {len(row)} cells under {len(headers)} headers"
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=True)]
    return [
        "".join(cell.ljust(width) + "\t" for cell, width in zip(line, widths, strict=True))
        for line in [headers, *rows]
    ]


def batches(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``consumeInBatches``: ``items`` in slices of at most ``size``."""
    assert size > 0
    return [items[start : start + size] for start in range(0, len(items), size)]


def _or(value: int | None, default: int) -> int:
    return default if value is None else value
