"""The export manifest: which offsets of a topic are already in the Parquet output.

Theory of operation. ``export-topic`` writes a topic's records below the high watermark to
``OUT/partition=N/`` and records every run in ``OUT/_pykraft_manifest.json``. A run goes through
two states, and only the manifest says which:

    (none) --plan+write to OUT/_staging/run-K-A/--> PENDING --files moved into place--> COMMITTED

1. ``plan_export`` asks, per partition, for ``[next offset, end)``, where the next offset is
   the end of the committed ranges (or the log start offset, if retention or DeleteRecords has
   removed records that were never exported: the skipped range is reported), and the end is
   the high watermark, or under ``read_committed`` the last stable offset.
2. Spark writes the run to ``_staging/run-K-A`` (Spark and Parquet readers ignore ``_`` paths),
   ``A`` naming this driver's attempt, so a task of an earlier, killed driver still running
   cannot add files to it, and commits it; the committed files must hold, per partition,
   exactly the rows the job read (``export.output_check``), or the run stops here, loudly.
3. ``begin_run`` records the run as PENDING with its ranges, record counts and staging
   directory (recovery moves that directory's files, no other attempt's); the manifest is
   replaced by a complete new file, renamed over it (``export.output_store``).
4. The staged files are renamed into ``partition=N/`` with a ``run-K-`` prefix.
5. ``commit_run`` marks the run COMMITTED.

A crash (or a failed check) before 3 leaves only staging files, deleted by the next run; a
crash between 3 and 5 is rolled forward by the next run, which moves the files of the staging
directory the manifest names (complete and checked before 3), checks every partition with
records has its files, then deletes every attempt's staging directory. Only one run works on an
output at a time: it holds ``LOCK_FILE`` (``export.export_topic_job``) from before recovery on.
So a rerun exports exactly the offsets that are new, never one twice. Pure: the moves and Spark
live in ``export.export_topic_job``.

Transactions. Under ``read_committed`` a range ends at the last stable offset, the first offset
of the oldest transaction still open; the records from there on (committed or not) wait for
the next run, which starts exactly there. The last stable offset never moves back while the
high watermark does not (a transaction open at a later high watermark was open at an earlier
one, so it began at or after the earlier last stable offset), so no offset is skipped, and an
aborted transaction's records are dropped whichever run reads them. The manifest records the
isolation level and refuses a run at the other one: one output never mixes aborted records with
committed ones. A manifest written before isolation levels existed takes its next run's.

Sources. A run reads the brokers' disks (``--log-dirs``) or the Kafka protocol
(``--bootstrap-server``, ``export.kafka_export_plan``). The Kafka protocol carries no leader
epoch or producer fields, so its output has fewer columns: the manifest records
``"source": "kafka"`` for such an output (and nothing for the disks', as before), and refuses a
run from the other source, so one output never mixes Parquet schemas.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from pykraft.export.isolation import IsolationLevel, parse_isolation_level

MANIFEST_FILE = "_pykraft_manifest.json"
STAGING_DIR = "_staging"
# Held by the run writing the output (created only if absent), so two runs never overlap.
LOCK_FILE = "_pykraft_lock"
# Version 2: a run may name its staging directory (``staging``). A build that reads only
# version 1 ignores that field and would publish from ``_staging/run-K`` (empty), mark the run
# COMMITTED and delete the staged files; so a manifest naming one is written as version 2,
# which such a build refuses. Version 1 (no run names one) is still written and read.
FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1
READ_FORMAT_VERSIONS = (LEGACY_FORMAT_VERSION, FORMAT_VERSION)
LOG_DIRS_SOURCE = "log-dirs"  # never written: a manifest without "source" is this one's
KAFKA_SOURCE = "kafka"
SOURCE_FLAGS = {LOG_DIRS_SOURCE: "--log-dirs", KAFKA_SOURCE: "--bootstrap-server"}


class ManifestError(ValueError):
    """The manifest is unreadable, malformed, or for another topic; names the file."""


class RunState(enum.Enum):
    PENDING = "PENDING"
    COMMITTED = "COMMITTED"


@attrs.frozen(order=True)
class ExportedRange:
    """Offsets ``[start_offset, end_offset)`` of one partition; ``records`` is how many rows
    that range held (fewer than its width when offsets were skipped: control records, aborted
    transactions' records)."""

    partition: int
    start_offset: int
    end_offset: int
    records: int = 0


@attrs.frozen
class ExportRun:
    run_id: int
    state: RunState
    created_ms: int
    ranges: tuple[ExportedRange, ...]
    # Where the run was staged, relative to the output; None in manifests written before
    # staging directories were named per attempt: ``_staging/run-K`` then.
    staging: str | None = None

    @property
    def staging_dir(self) -> str:
        return self.staging if self.staging is not None else f"{STAGING_DIR}/run-{self.run_id}"


@attrs.frozen
class Manifest:
    topic: str
    runs: tuple[ExportRun, ...] = ()
    # None: written before isolation levels were recorded (the next run sets it).
    isolation_level: IsolationLevel | None = None
    source: str = LOG_DIRS_SOURCE  # what the runs read; see "Sources" above
    # The topic's id when the runs read it (Kafka source); None: not known yet (a manifest
    # written before ids were recorded takes its next run's). Another id: the topic was
    # deleted and recreated since.
    topic_id: str | None = None

    def next_offsets(self) -> dict[int, int]:
        """Per partition, the end of what committed runs exported."""
        offsets: dict[int, int] = {}
        for run in self.runs:
            if run.state is RunState.COMMITTED:
                for r in run.ranges:
                    offsets[r.partition] = max(offsets.get(r.partition, 0), r.end_offset)
        return offsets

    def pending_run(self) -> ExportRun | None:
        pending = [run for run in self.runs if run.state is RunState.PENDING]
        # Invariant: at most one run is pending (begin_run refuses a second).
        assert len(pending) <= 1, pending
        return pending[0] if pending else None

    def next_run_id(self) -> int:
        return max((run.run_id for run in self.runs), default=0) + 1


@attrs.frozen
class ExportPlan:
    ranges: tuple[ExportedRange, ...]
    # Offsets removed from the log (retention, DeleteRecords) before they were ever exported.
    skipped: tuple[ExportedRange, ...] = ()
    # Partitions the manifest does not know with nothing to export now: recorded with the run
    # as empty ranges at their end, so a later run knows where they stood (an unknown
    # partition of an exported topic whose log starts past 0 has lost records).
    empty: tuple[ExportedRange, ...] = ()
    # The topic's id as the brokers describe it (Kafka source), recorded with the run.
    topic_id: str | None = None


def plan_export(manifest: Manifest, available: Mapping[int, tuple[int, int]]) -> ExportPlan:
    """What to export now, given each partition's ``(log start offset, end)``: the end is the
    high watermark, or the last stable offset under read_committed."""
    done = manifest.next_offsets()
    ranges, skipped, empty = [], [], []
    for partition in sorted(available):
        log_start, end = available[partition]
        exported_to = done.get(partition, 0)
        # Once the topic was exported, records of any partition it did not export (a partition
        # empty then, or added since: its log starts at 0) were lost; on the first run a
        # partition just starts at its log start.
        if done and log_start > exported_to:
            skipped.append(ExportedRange(partition, exported_to, log_start))
        start = max(exported_to, log_start)
        if start < end:
            ranges.append(ExportedRange(partition, start, end))
        elif partition not in done:
            empty.append(ExportedRange(partition, start, start))
    return ExportPlan(tuple(ranges), tuple(skipped), tuple(empty))


def staging_dir(run_id: int, attempt: str) -> str:
    """The staging directory of run ``run_id`` written by driver attempt ``attempt``."""
    if not _is_attempt(attempt):
        raise ValueError(f"an attempt name is letters, digits, - and _: {attempt!r}")
    return f"{STAGING_DIR}/run-{run_id}-{attempt}"


def _is_attempt(attempt: str) -> bool:
    return bool(attempt) and all(c.isascii() and (c.isalnum() or c in "-_") for c in attempt)


def begin_run(
    manifest: Manifest,
    run_id: int,
    ranges: tuple[ExportedRange, ...],
    created_ms: int,
    staging: str | None = None,
) -> Manifest:
    if manifest.pending_run() is not None:
        raise ManifestError(f"run {manifest.pending_run()} is still pending; recover it first")
    run = ExportRun(run_id, RunState.PENDING, created_ms, ranges, staging)
    return attrs.evolve(manifest, runs=(*manifest.runs, run))


def commit_run(manifest: Manifest, run_id: int) -> Manifest:
    runs = tuple(
        attrs.evolve(run, state=RunState.COMMITTED) if run.run_id == run_id else run
        for run in manifest.runs
    )
    return attrs.evolve(manifest, runs=runs)


def unpublished_partitions(run: ExportRun, published: Mapping[int, list[str]]) -> list[int]:
    """The partitions of ``run`` that exported records but have no ``run-K-`` file among
    ``published`` (file names per partition directory)."""
    prefix = f"run-{run.run_id}-"
    return [
        r.partition
        for r in run.ranges
        if r.records > 0
        and not any(name.rsplit("/", 1)[-1].startswith(prefix) for name in published[r.partition])
    ]


def encode_manifest(manifest: Manifest) -> bytes:
    # What a version-1 reader would ignore (a named staging directory, a Kafka-read output's
    # "source") is written as version 2, which such a reader refuses.
    staged = any(run.staging is not None for run in manifest.runs)
    newer = staged or manifest.source != LOG_DIRS_SOURCE or manifest.topic_id is not None
    document: dict[str, Any] = {
        "version": FORMAT_VERSION if newer else LEGACY_FORMAT_VERSION,
        "topic": manifest.topic,
        "runs": [_run_document(run) for run in manifest.runs],
    }
    if manifest.isolation_level is not None:
        document["isolationLevel"] = manifest.isolation_level.value
    if manifest.source != LOG_DIRS_SOURCE:
        document["source"] = manifest.source
    if manifest.topic_id is not None:
        document["topicId"] = manifest.topic_id
    return (json.dumps(document, indent=1) + "\n").encode("utf-8")


def _run_document(run: ExportRun) -> dict[str, Any]:
    document: dict[str, Any] = {
        "runId": run.run_id,
        "state": run.state.value,
        "createdMs": run.created_ms,
        "ranges": [
            {
                "partition": r.partition,
                "startOffset": r.start_offset,
                "endOffset": r.end_offset,
                "records": r.records,
            }
            for r in run.ranges
        ],
    }
    if run.staging is not None:
        document["staging"] = run.staging
    return document


def decode_manifest(data: bytes, source: str) -> Manifest:
    try:
        document = json.loads(data)
        if document["version"] not in READ_FORMAT_VERSIONS:
            raise ManifestError(
                f"manifest {source}: version {document['version']!r} is not supported (this "
                f"build reads {' and '.join(map(str, READ_FORMAT_VERSIONS))}): run a newer "
                "pykraft"
            )
        runs = tuple(_run(run) for run in document["runs"])
        level = _isolation_level(document, source)
        made_with = str(document.get("source", LOG_DIRS_SOURCE))
        if made_with not in SOURCE_FLAGS:
            raise ManifestError(f"manifest {source}: source {made_with!r} is not known")
        topic_id = document.get("topicId")
        return Manifest(
            str(document["topic"]),
            runs,
            level,
            made_with,
            None if topic_id is None else str(topic_id),
        )
    except (ValueError, KeyError, TypeError) as error:
        if isinstance(error, ManifestError):
            raise
        raise ManifestError(f"manifest {source} is malformed: {error!r}") from None


def _isolation_level(document: Any, source: str) -> IsolationLevel | None:
    text = document.get("isolationLevel")
    if text is None:
        return None
    level = parse_isolation_level(str(text))
    if level is None:
        raise ManifestError(f"manifest {source}: isolationLevel {text!r} is not known")
    return level


def _run(obj: Any) -> ExportRun:
    ranges = tuple(
        ExportedRange(
            int(r["partition"]), int(r["startOffset"]), int(r["endOffset"]), int(r["records"])
        )
        for r in obj["ranges"]
    )
    run_id = int(obj["runId"])
    staging = obj.get("staging")
    if staging is not None:
        # Only this run's own directory, as staging_dir names it: never another run's.
        prefix = f"{STAGING_DIR}/run-{run_id}-"
        attempt = str(staging).removeprefix(prefix)
        if not str(staging).startswith(prefix) or not _is_attempt(attempt):
            raise ValueError(f"run {run_id}: staging {staging!r} is not {prefix}<attempt>")
    return ExportRun(
        run_id,
        RunState(obj["state"]),
        int(obj["createdMs"]),
        ranges,
        None if staging is None else str(staging),
    )


def load_manifest(
    out_dir: Path, topic: str, isolation_level: IsolationLevel | None = None
) -> Manifest:
    """The manifest in the local directory ``out_dir`` (see ``manifest_from_bytes``)."""
    path = out_dir / MANIFEST_FILE
    try:
        data: bytes | None = path.read_bytes()
    except FileNotFoundError:
        data = None
    except OSError as error:
        raise ManifestError(f"manifest {path}: cannot read: {error.strerror}") from None
    return manifest_from_bytes(data, str(out_dir), topic, isolation_level)


def manifest_from_bytes(
    data: bytes | None,
    out_dir: str,
    topic: str,
    isolation_level: IsolationLevel | None = None,
    source: str = LOG_DIRS_SOURCE,
) -> Manifest:
    """The manifest read from output ``out_dir`` (``data`` None: there is none yet, so an empty
    one) for a run at ``isolation_level`` (None: any, for reading it) from ``source``; refuses
    another topic's, another isolation level's, or another source's."""
    if data is None:
        return Manifest(topic, isolation_level=isolation_level, source=source)
    manifest = decode_manifest(data, f"{out_dir}/{MANIFEST_FILE}")
    if manifest.topic != topic:
        raise ManifestError(
            f"{out_dir} holds an export of topic {manifest.topic!r}, not {topic!r}: "
            "use another --out directory"
        )
    if isolation_level is None:
        return manifest
    if manifest.source != source:
        raise ManifestError(
            f"{out_dir} holds an export of {topic!r} read with {SOURCE_FLAGS[manifest.source]}, "
            f"whose Parquet columns differ from {SOURCE_FLAGS[source]}'s: use another --out "
            f"directory, or {SOURCE_FLAGS[manifest.source]}"
        )
    if manifest.isolation_level not in (None, isolation_level):
        raise ManifestError(
            f"{out_dir} holds a {manifest.isolation_level.value} export of {topic!r}, not "
            f"{isolation_level.value}: use another --out directory, or the same isolation level"
        )
    return attrs.evolve(manifest, isolation_level=isolation_level)
