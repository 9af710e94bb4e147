"""One SparkSession for the whole export suite: starting one takes seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# The Spark standalone cluster (a master and two workers without pykraft), one per module.
from tests.export.spark_cluster import spark_standalone  # noqa: F401


def _build_local() -> Any:
    from pykraft.export.session import build_session

    # Two cores: the machine's. Tiny data: two shuffle partitions are plenty.
    return build_session(
        "local[2]", "pykraft-tests", extra_conf={"spark.sql.shuffle.partitions": "2"}
    )


@pytest.fixture(scope="session")
def _local_sessions() -> Iterator[list[Any]]:
    """The ``local[2]`` session, built once; again only after something stopped it (a module
    whose session drives the standalone cluster: a process holds one SparkContext at a time)."""
    sessions: list[Any] = []
    try:
        yield sessions
    finally:
        if sessions:
            sessions[-1].stop()


@pytest.fixture
def spark(_local_sessions: list[Any]) -> Any:
    if not _local_sessions or _local_sessions[-1].sparkContext._jsc is None:
        _local_sessions.append(_build_local())
    return _local_sessions[-1]
