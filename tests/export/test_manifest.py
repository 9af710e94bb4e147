"""The export-topic manifest: planning, run states, encoding (pure; no Spark)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from pykraft.export.isolation import IsolationLevel
from pykraft.export.manifest import (
    MANIFEST_FILE,
    ExportedRange,
    ExportPlan,
    Manifest,
    ManifestError,
    RunState,
    begin_run,
    commit_run,
    decode_manifest,
    encode_manifest,
    load_manifest,
    plan_export,
    staging_dir,
    unpublished_partitions,
)
from pykraft.export.output_lock import lock_text, locked_message


def committed(*ranges: tuple[int, int, int]) -> Manifest:
    manifest = Manifest("orders")
    rs = tuple(ExportedRange(p, s, e) for p, s, e in ranges)
    return commit_run(begin_run(manifest, 1, rs, 0), 1)


def check(manifest: Manifest, available: dict[int, tuple[int, int]], expected: ExportPlan) -> None:
    assert plan_export(manifest, available) == expected


def test_plans() -> None:
    empty = Manifest("orders")
    # First run: everything from the log start to the high watermark; an empty partition is
    # recorded where it stands.
    check(
        empty,
        {0: (0, 10), 1: (0, 0)},
        ExportPlan((ExportedRange(0, 0, 10),), empty=(ExportedRange(1, 0, 0),)),
    )
    # A rerun: only what is new; an unchanged partition is not read at all.
    check(
        committed((0, 0, 10), (1, 0, 4)),
        {0: (0, 15), 1: (0, 4)},
        ExportPlan((ExportedRange(0, 10, 15),)),
    )
    # Retention removed offsets 10..11 before they were exported: reported, then skipped.
    check(
        committed((0, 0, 10)),
        {0: (12, 20)},
        ExportPlan((ExportedRange(0, 12, 20),), (ExportedRange(0, 10, 12),)),
    )
    # A partition added since the last run starts at offset 0.
    check(committed((0, 0, 10)), {0: (0, 10), 2: (0, 5)}, ExportPlan((ExportedRange(2, 0, 5),)))
    # One the manifest does not know whose log starts later lost records (review 2: empty at
    # the last run, then appended to and trimmed by retention): reported, then skipped.
    check(
        committed((0, 0, 10)),
        {0: (0, 10), 1: (50, 100)},
        ExportPlan((ExportedRange(1, 50, 100),), (ExportedRange(1, 0, 50),)),
    )
    # Recorded empty at its log start 50 (all its records were removed before the first run):
    # nothing is lost.
    check(
        committed((0, 0, 10), (1, 50, 50)),
        {0: (0, 10), 1: (50, 60)},
        ExportPlan((ExportedRange(1, 50, 60),)),
    )


def test_run_states_and_round_trip() -> None:
    manifest = begin_run(Manifest("orders"), 1, (ExportedRange(0, 0, 10, 9),), 123)
    assert manifest.pending_run() is not None
    assert manifest.next_offsets() == {}  # pending runs do not count
    with pytest.raises(ManifestError, match="still pending"):
        begin_run(manifest, 2, (), 0)
    manifest = commit_run(manifest, 1)
    assert manifest.pending_run() is None and manifest.next_offsets() == {0: 10}
    assert manifest.next_run_id() == 2
    assert decode_manifest(encode_manifest(manifest), "m") == manifest
    assert manifest.runs[0].state is RunState.COMMITTED


def test_bad_and_foreign_manifests(tmp_path: Path) -> None:
    assert load_manifest(tmp_path, "orders") == Manifest("orders")
    (tmp_path / MANIFEST_FILE).write_bytes(encode_manifest(Manifest("payments")))
    with pytest.raises(ManifestError, match="topic 'payments', not 'orders'"):
        load_manifest(tmp_path, "orders")
    (tmp_path / MANIFEST_FILE).write_text("{")
    with pytest.raises(ManifestError, match=f"manifest {tmp_path / MANIFEST_FILE} is malformed"):
        load_manifest(tmp_path, "orders")


def test_the_isolation_level_is_recorded_and_never_mixed(tmp_path: Path) -> None:
    committed, uncommitted = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
    fresh = load_manifest(tmp_path, "orders", committed)
    assert fresh == Manifest("orders", isolation_level=committed)
    manifest = commit_run(begin_run(fresh, 1, (ExportedRange(0, 0, 10, 9),), 0), 1)
    (tmp_path / MANIFEST_FILE).write_bytes(encode_manifest(manifest))
    assert load_manifest(tmp_path, "orders", committed) == manifest
    assert load_manifest(tmp_path, "orders") == manifest  # reading it: any level
    # An output holding committed rows only never receives aborted ones, nor the reverse.
    with pytest.raises(ManifestError, match="holds a read_committed export of 'orders'"):
        load_manifest(tmp_path, "orders", uncommitted)
    # Written before levels were recorded: the next run's level is adopted.
    legacy = encode_manifest(attrs.evolve(manifest, isolation_level=None))
    assert b"isolationLevel" not in legacy
    (tmp_path / MANIFEST_FILE).write_bytes(legacy)
    adopted = load_manifest(tmp_path, "orders", uncommitted)
    assert adopted == attrs.evolve(manifest, isolation_level=uncommitted)
    bad = encode_manifest(manifest).replace(b'"read_committed"', b'"READ_COMMITTED"')
    with pytest.raises(ManifestError, match="isolationLevel 'READ_COMMITTED' is not known"):
        decode_manifest(bad, "m")


def test_a_plan_stops_at_the_end_it_is_given() -> None:
    # Under read_committed the end is the last stable offset: the rest waits, and the next
    # run starts there even when the high watermark had passed it.
    first = plan_export(Manifest("orders"), {0: (0, 16)})
    assert first.ranges == (ExportedRange(0, 0, 16),)
    after = commit_run(begin_run(Manifest("orders"), 1, first.ranges, 0), 1)
    assert plan_export(after, {0: (0, 16)}).ranges == ()
    assert plan_export(after, {0: (0, 21)}).ranges == (ExportedRange(0, 16, 21),)


def test_each_attempt_stages_in_its_own_directory_and_the_manifest_names_it() -> None:
    """Issue 15: a run's staging directory names the driver attempt; recovery reads it back,
    and a manifest written before that (no ``staging``) means ``_staging/run-K``."""
    first, second = staging_dir(3, "a1b2"), staging_dir(3, "c3d4")
    assert first == "_staging/run-3-a1b2" and first != second
    for bad in ("", "../x", "a/b", "a b"):
        with pytest.raises(ValueError, match="attempt name"):
            staging_dir(3, bad)
    manifest = begin_run(Manifest("orders"), 3, (ExportedRange(0, 0, 10, 9),), 5, first)
    decoded = decode_manifest(encode_manifest(manifest), "m")
    assert decoded == manifest
    pending = decoded.pending_run()
    assert pending is not None and pending.staging_dir == first
    legacy = encode_manifest(manifest).replace(b'"staging": "_staging/run-3-a1b2"', b'"x": 0')
    assert b"staging" not in legacy
    pending = decode_manifest(legacy, "m").pending_run()
    assert pending is not None and pending.staging is None
    assert pending.staging_dir == "_staging/run-3"
    # Only this run's own directory: not outside _staging/, not another run's (review 10).
    outsiders = ("partition=0", "_staging/run-3/../../x", "/tmp/run-3", "_staging/run-3-")
    for outside in (*outsiders, "_staging/run-4-a1b2", "_staging/run-33-a1b2"):
        text = encode_manifest(manifest).replace(first.encode(), outside.encode())
        with pytest.raises(ManifestError, match="is not _staging/run-3-<attempt>"):
            decode_manifest(text, "m")


def test_a_manifest_naming_a_staging_directory_is_version_2() -> None:
    """Review 2: a build reading only version 1 ignores ``staging``, and its recovery would
    commit a pending run without moving its files, then delete them; so such a manifest is
    version 2, which that build refuses. One without is still version 1, and both are read."""
    ranges = (ExportedRange(0, 0, 10, 9),)
    staged = begin_run(Manifest("orders"), 3, ranges, 5, staging_dir(3, "a1b2"))
    plain = begin_run(Manifest("orders"), 3, ranges, 5)
    assert json.loads(encode_manifest(staged))["version"] == 2
    assert json.loads(encode_manifest(commit_run(staged, 3)))["version"] == 2
    assert json.loads(encode_manifest(plain))["version"] == 1
    for manifest in (staged, plain):
        assert decode_manifest(encode_manifest(manifest), "m") == manifest
    # What the previous build wrote: version 1 with staging.
    earlier = encode_manifest(staged).replace(b'"version": 2', b'"version": 1')
    assert decode_manifest(earlier, "m") == staged
    newer = encode_manifest(staged).replace(b'"version": 2', b'"version": 3')
    with pytest.raises(ManifestError, match=r"version 3 is not supported .* reads 1 and 2"):
        decode_manifest(newer, "m")


def test_lock_messages_and_unpublished_partitions() -> None:
    held = locked_message("file:/out", lock_text("a1b2", 0))
    assert "held by export-topic attempt a1b2 since 1970-01-01 00:00:00 UTC" in held
    assert "delete _pykraft_lock and run again" in held
    assert "held by an unreadable lock (b'{')" in locked_message("file:/out", b"{")
    ranges = (ExportedRange(0, 0, 10, 9), ExportedRange(1, 0, 4, 0), ExportedRange(2, 0, 5, 5))
    run = begin_run(Manifest("orders"), 3, ranges, 0).runs[0]
    published = {
        0: ["partition=0/run-3-part-0.parquet"],
        1: [],  # no records: no file expected
        2: ["partition=2/run-30-part-0.parquet", "partition=2/run-2-part-0.parquet"],
    }
    assert unpublished_partitions(run, published) == [2]
