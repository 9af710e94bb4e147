"""storage/producer_append.py's apply_batch builds the new ProducerStateEntry field by field
(faster than ``attrs.evolve``): every field it does not set must come through unchanged, also
one added to the entry later."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pykraft.storage.producer_append import apply_batch
from pykraft.storage.producer_entry import BatchMetadata, ProducerStateEntry
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.records import ControlRecordType
from pykraft.storage.txn_markers import EndTransactionMarker

PID, EPOCH = 7, 3
# A value unlike the default for each field the entry has today.
NON_DEFAULT: dict[str, Any] = {
    "producer_id": PID,
    "producer_epoch": EPOCH,
    "batches": (BatchMetadata(0, 4, 100, 104, 1_000),),
    "coordinator_epoch": 9,
    "last_timestamp": 1_000,
    "current_txn_first_offset": 100,
}


def entry_without_defaults() -> ProducerStateEntry:
    """Every field set away from its default; a field this test does not know yet gets a
    value of its own (``object()``), so apply_batch must carry it over to pass."""
    values: dict[str, Any] = {
        field.name: NON_DEFAULT[field.name] if field.name in NON_DEFAULT else object()
        for field in attrs.fields(ProducerStateEntry)
    }
    entry = ProducerStateEntry(**values)
    for field in attrs.fields(ProducerStateEntry):
        assert getattr(entry, field.name) != field.default, field.name
    return entry


def header(epoch: int, sequence: int, *, transactional: bool, control: bool) -> BatchHeader:
    attributes = (0x10 if transactional else 0) | (0x20 if control else 0)
    return BatchHeader(
        base_offset=0, batch_length=49, partition_leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=0, base_timestamp=0, max_timestamp=0,
        producer_id=PID, producer_epoch=epoch, base_sequence=sequence, records_count=1,
    )  # fmt: skip


MARKER = EndTransactionMarker(ControlRecordType.COMMIT, coordinator_epoch=11)


# (case, header, marker, the fields apply_batch sets and their values after it)
CASES = [
    (
        "data batch, same epoch, inside the open transaction",
        header(EPOCH, 5, transactional=True, control=False),
        None,
        {
            "producer_epoch": EPOCH,
            "batches": (*NON_DEFAULT["batches"], BatchMetadata(5, 5, 105, 105, 2_000)),
            "last_timestamp": 2_000,
            "current_txn_first_offset": 100,
        },
    ),
    (
        "data batch of a new epoch",
        header(EPOCH + 1, 0, transactional=False, control=False),
        None,
        {
            "producer_epoch": EPOCH + 1,
            "batches": (BatchMetadata(0, 0, 105, 105, 2_000),),
            "last_timestamp": 2_000,
            "current_txn_first_offset": 100,
        },
    ),
    (
        "end-transaction marker",
        header(EPOCH, -1, transactional=True, control=True),
        MARKER,
        {
            "producer_epoch": EPOCH,
            "batches": NON_DEFAULT["batches"],
            "coordinator_epoch": 11,
            "last_timestamp": 2_000,
            "current_txn_first_offset": None,
        },
    ),
]


@pytest.mark.parametrize(
    ("batch", "marker", "set_fields"), [case[1:] for case in CASES], ids=[c[0] for c in CASES]
)
def test_apply_batch_carries_over_every_field_it_does_not_set(
    batch: BatchHeader, marker: EndTransactionMarker | None, set_fields: dict[str, Any]
) -> None:
    entry = entry_without_defaults()
    after = apply_batch(entry, batch, 105, 105, 2_000, marker)
    for field in attrs.fields(ProducerStateEntry):
        expected = set_fields.get(field.name, getattr(entry, field.name))
        assert getattr(after, field.name) == expected, field.name
