"""One SparkSession for the whole export suite: starting one takes seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

# The Spark standalone cluster (a master and two workers without pykraft), one per module.
from tests.export.spark_cluster import spark_standalone  # noqa: F401


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pykraft.export.session import build_session

    # Two cores: the machine's. Tiny data: two shuffle partitions are plenty.
    session = build_session(
        "local[2]", "pykraft-tests", extra_conf={"spark.sql.shuffle.partitions": "2"}
    )
    try:
        yield session
    finally:
        session.stop()
