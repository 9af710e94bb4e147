"""One SparkSession for the whole export suite: starting one takes seconds."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from export.session import build_session

    # Two cores: the machine's; the data is small, a wider pool only adds overhead.
    session = build_session("local[2]", "pykraft-tests")
    try:
        yield session
    finally:
        session.stop()
