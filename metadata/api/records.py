"""The metadata log and snapshots for brokers: ``GET /v1/metadata/records`` and snapshots.

Brokers are not Raft members (DESIGN.md §3.1): they long-poll the committed log from a retained
window; below it the controller answers 409 SNAPSHOT_REQUIRED naming its latest snapshot
(``errors.ErrorBody``), which the broker downloads before reading on from its end offset.

GET /v1/metadata/records?from=N&max_wait_ms=W&max_records=R
    -> {"from_offset", "next_offset", "log_end_offset",
        "batches": [{"base_offset", "last_offset", "epoch", "append_time_ms",
                     "records": [<metadata.codec record JSON>, ...]}]}
GET /v1/metadata/snapshots -> {"snapshots": [{id, end_offset, epoch, size_bytes}], "latest"}
GET /v1/metadata/snapshots/{id} -> the snapshot file (application/x-ndjson)

The controller splices the records' stored JSON into its answer without decoding them again
(``records_page_json``); a broker decodes every record strictly (``metadata.codec``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.codec import record_from_json
from pykraft.metadata.record_schema import MetadataCodecError
from pykraft.metadata.records import MetadataRecord

# Bounds on one read (STYLE.md §7).
DEFAULT_FETCH_RECORDS = 10_000
MAX_FETCH_RECORDS = 100_000


# The answer header with which a standby names the active controller to a registered broker's
# poll. The broker polls the active controller next (as KRaft's observers fetch from the
# leader): only the active controller watches a broker's connections, and a killed broker is
# fenced fast only when both of its connections were there (quorum/broker_channels.py).
ACTIVE_CONTROLLER_HEADER = "X-Active-Controller"


@attrs.frozen(kw_only=True)
class RecordsQuery:
    """The query of ``GET /v1/metadata/records``."""

    from_offset: int
    max_wait_ms: int = 0
    max_records: int = DEFAULT_FETCH_RECORDS
    # The registered broker asking, -1 for anyone else (a tool, a broker not registered yet):
    # the active controller watches a broker's long-poll connection (quorum/managers/sessions.py).
    broker_id: int = -1
    broker_epoch: int = -1


def records_query_to_params(query: RecordsQuery) -> dict[str, str]:
    params = {
        "from": str(query.from_offset),
        "max_wait_ms": str(query.max_wait_ms),
        "max_records": str(query.max_records),
    }
    if query.broker_id >= 0:
        params["broker_id"] = str(query.broker_id)
        params["broker_epoch"] = str(query.broker_epoch)
    return params


def _query_int(params: Mapping[str, str], name: str, default: int | None, minimum: int) -> int:
    raw = params.get(name)
    if raw is None:
        if default is None:
            raise JsonBodyError(f"The query parameter {name!r} is required.")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise JsonBodyError(
            f"The query parameter {name!r} must be an integer, got {raw!r}."
        ) from None
    if value < minimum:
        raise JsonBodyError(f"The query parameter {name!r} must be at least {minimum}.")
    return value


def records_query_from_params(params: Mapping[str, str]) -> RecordsQuery:
    """The query as asked; the controller caps ``max_wait_ms`` and ``max_records`` itself."""
    return RecordsQuery(
        from_offset=_query_int(params, "from", None, 0),
        max_wait_ms=_query_int(params, "max_wait_ms", 0, 0),
        max_records=_query_int(params, "max_records", DEFAULT_FETCH_RECORDS, 1),
        broker_id=_query_int(params, "broker_id", -1, -1),
        broker_epoch=_query_int(params, "broker_epoch", -1, -1),
    )


@attrs.frozen(kw_only=True)
class MetadataBatch:
    """One committed atomic batch; record ``i`` has offset ``base_offset + i``."""

    base_offset: int
    last_offset: int
    epoch: int
    append_time_ms: int
    records: tuple[MetadataRecord, ...]


@attrs.frozen(kw_only=True)
class RecordsPage:
    from_offset: int
    # The offset to ask for next (one past the last record of ``batches``).
    next_offset: int
    # One past the controller's last committed offset when it answered.
    log_end_offset: int
    batches: tuple[MetadataBatch, ...]


@attrs.frozen(kw_only=True)
class EncodedBatch:
    """A committed batch as the controller keeps it: its records already JSON (metadata.codec)."""

    base_offset: int
    last_offset: int
    epoch: int
    append_time_ms: int
    records: Sequence[bytes]


def records_page_json(
    from_offset: int, next_offset: int, log_end_offset: int, batches: Sequence[EncodedBatch]
) -> bytes:
    """The answer, with the stored record JSON spliced in without decoding it again."""
    parts = [
        b'{"from_offset":%d,"next_offset":%d,"log_end_offset":%d,"batches":['
        % (from_offset, next_offset, log_end_offset)
    ]
    for index, batch in enumerate(batches):
        if index:
            parts.append(b",")
        parts.append(
            b'{"base_offset":%d,"last_offset":%d,"epoch":%d,"append_time_ms":%d,'
            b'"records":['
            % (batch.base_offset, batch.last_offset, batch.epoch, batch.append_time_ms)
        )
        parts.append(b",".join(batch.records))
        parts.append(b"]}")
    parts.append(b"]}")
    return b"".join(parts)


def _batch_from_json(fields: Fields) -> MetadataBatch:
    try:
        records = tuple(record_from_json(record) for record in fields.array("records"))
    except MetadataCodecError as error:
        raise JsonBodyError(f"A metadata record does not decode: {error}") from None
    return MetadataBatch(
        base_offset=fields.integer("base_offset"),
        last_offset=fields.integer("last_offset"),
        epoch=fields.integer("epoch"),
        append_time_ms=fields.integer("append_time_ms"),
        records=records,
    )


def records_page_from_json(fields: Fields) -> RecordsPage:
    return RecordsPage(
        from_offset=fields.integer("from_offset"),
        next_offset=fields.integer("next_offset"),
        log_end_offset=fields.integer("log_end_offset"),
        batches=tuple(_batch_from_json(batch) for batch in fields.objects("batches")),
    )


@attrs.frozen(kw_only=True)
class SnapshotListing:
    snapshot_id: str
    end_offset: int
    epoch: int
    size_bytes: int


def snapshots_to_json(snapshots: Sequence[SnapshotListing]) -> JsonObject:
    return {
        "snapshots": [
            {
                "id": s.snapshot_id,
                "end_offset": s.end_offset,
                "epoch": s.epoch,
                "size_bytes": s.size_bytes,
            }
            for s in snapshots
        ],
        "latest": snapshots[-1].snapshot_id if snapshots else None,
    }


def snapshots_from_json(fields: Fields) -> tuple[SnapshotListing, ...]:
    return tuple(
        SnapshotListing(
            snapshot_id=s.string("id"),
            end_offset=s.integer("end_offset"),
            epoch=s.integer("epoch"),
            size_bytes=s.integer("size_bytes"),
        )
        for s in fields.objects("snapshots")
    )
