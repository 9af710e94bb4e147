"""The export-topic manifest: planning, run states, encoding (pure; no Spark)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
)


def committed(*ranges: tuple[int, int, int]) -> Manifest:
    manifest = Manifest("orders")
    rs = tuple(ExportedRange(p, s, e) for p, s, e in ranges)
    return commit_run(begin_run(manifest, 1, rs, 0), 1)


def check(manifest: Manifest, available: dict[int, tuple[int, int]], expected: ExportPlan) -> None:
    assert plan_export(manifest, available) == expected


def test_plans() -> None:
    empty = Manifest("orders")
    # First run: everything from the log start to the high watermark.
    check(empty, {0: (0, 10), 1: (0, 0)}, ExportPlan((ExportedRange(0, 0, 10),)))
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
    # A new partition starts at its log start.
    check(committed((0, 0, 10)), {0: (0, 10), 2: (3, 5)}, ExportPlan((ExportedRange(2, 3, 5),)))


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
