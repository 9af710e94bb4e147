"""Whether a run's output commit really holds what the run read: checked before the manifest.

A Spark write can "succeed" and leave nothing where the driver looks: on a cluster whose
executors write to a directory the driver cannot see (a local path on separate machines), the
tasks commit their files into their own ``_temporary`` directories and the driver's job commit
finds none to move. Trusting the job's success there loses the run silently: the manifest says
the offsets are exported and no later run reads them again.

So a run is committed to the manifest only when, for every partition of the plan, the rows
Spark counted while writing (an ``Observation`` on the written DataFrame: what the source read
for the planned ranges) equal the rows found in the output's committed Parquet files, and no
rows of another partition appear. Otherwise ``OutputCommitError`` names each difference and
nothing is committed. Pure: the counting lives in ``export.export_topic_job``.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pykraft.export.manifest import ExportedRange


class OutputCommitError(RuntimeError):
    """The run's committed output does not hold the rows the run read; nothing was committed."""


@attrs.frozen
class CountMismatch:
    partition: int
    read: int  # rows the write job read from the source
    found: int  # rows in the committed output


def count_mismatches(
    planned: tuple[ExportedRange, ...], read: Mapping[int, int], found: Mapping[int, int]
) -> tuple[CountMismatch, ...]:
    """Partitions whose rows read and rows found differ, including partitions outside the
    plan (either count missing counts as 0)."""
    in_plan = {r.partition for r in planned}
    return tuple(
        CountMismatch(p, read.get(p, 0), found.get(p, 0))
        for p in sorted(in_plan | set(read) | set(found))
        if read.get(p, 0) != found.get(p, 0) or p not in in_plan
    )


def checked_ranges(
    planned: tuple[ExportedRange, ...],
    read: Mapping[int, int],
    found: Mapping[int, int],
    location: str,
    *,
    committed: bool,
) -> tuple[ExportedRange, ...]:
    """The planned ranges with their record counts, or ``OutputCommitError`` when the output
    commit did not complete (``committed``: Spark's ``_SUCCESS`` marker is there) or its rows
    differ from those read."""
    mismatches = count_mismatches(planned, read, found)
    if not committed and any(read.values()):
        raise OutputCommitError(
            f"the output commit of {location} did not complete (no _SUCCESS); nothing committed"
        )
    if mismatches:
        details = ", ".join(
            f"partition {m.partition}: read {m.read}, found {m.found}" for m in mismatches
        )
        raise OutputCommitError(
            f"the rows in {location} differ from the rows read ({details}); nothing committed. "
            "If the executors wrote files this driver cannot see, use an output every process "
            "of the job can reach (hdfs://, s3a://, abfs://, or a shared file:// mount)"
        )
    return tuple(attrs.evolve(r, records=read.get(r.partition, 0)) for r in planned)
