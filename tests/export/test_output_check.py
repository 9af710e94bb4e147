"""``export.output_check``: a run reaches the manifest only if its output holds what it read."""

from __future__ import annotations

import pytest

from pykraft.export.manifest import ExportedRange
from pykraft.export.output_check import (
    CountMismatch,
    OutputCommitError,
    checked_ranges,
    count_mismatches,
)

PLAN = (ExportedRange(0, 10, 20), ExportedRange(2, 0, 5))


@pytest.mark.parametrize(
    ("read", "found", "expected"),
    [
        ({0: 10, 2: 5}, {0: 10, 2: 5}, ()),
        # Ranges of control records or aborted transactions only: no rows, none expected.
        ({0: 0, 2: 0}, {}, ()),
        # The silent loss: executors wrote files the driver's output commit never saw.
        ({0: 10, 2: 5}, {}, (CountMismatch(0, 10, 0), CountMismatch(2, 5, 0))),
        ({0: 10, 2: 5}, {0: 10, 2: 4}, (CountMismatch(2, 5, 4),)),
        # A speculative or retried task's file committed twice.
        ({0: 10, 2: 5}, {0: 20, 2: 5}, (CountMismatch(0, 10, 20),)),
        # Rows of a partition the run never planned: a bug, never committed.
        ({0: 10, 2: 5}, {0: 10, 1: 3, 2: 5}, (CountMismatch(1, 0, 3),)),
    ],
)
def test_count_mismatches(
    read: dict[int, int], found: dict[int, int], expected: tuple[CountMismatch, ...]
) -> None:
    assert count_mismatches(PLAN, read, found) == expected


def test_checked_ranges_take_the_counts_read() -> None:
    ranges = checked_ranges(
        PLAN, {0: 9, 2: 5}, {0: 9, 2: 5}, "file:/o/_staging/run-1", committed=True
    )
    assert ranges == (ExportedRange(0, 10, 20, 9), ExportedRange(2, 0, 5, 5))


def test_a_mismatch_names_every_partition_and_commits_nothing() -> None:
    with pytest.raises(OutputCommitError) as raised:
        checked_ranges(PLAN, {0: 10, 2: 5}, {}, "file:/o/_staging/run-1", committed=True)
    assert str(raised.value).startswith(
        "the rows in file:/o/_staging/run-1 differ from the rows read "
        "(partition 0: read 10, found 0, partition 2: read 5, found 0); nothing committed."
    )


def test_an_output_commit_that_did_not_finish_is_refused() -> None:
    with pytest.raises(OutputCommitError, match="did not complete"):
        checked_ranges(PLAN, {0: 10, 2: 5}, {0: 10, 2: 5}, "file:/o/r", committed=False)
    # Nothing read, nothing written: Spark may skip the marker; the run only moves offsets on.
    assert checked_ranges(PLAN, {0: 0, 2: 0}, {}, "file:/o/r", committed=False)[0].records == 0
