"""What the listener's hostile cases share beyond the suite's fixture: a victim partition whose
log end offset and files must not change."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from tests.hostile.conftest import SingleBroker

VICTIM = "victim"


@contextmanager
def nothing_written(broker: SingleBroker) -> Iterator[None]:
    """The victim partition's log end offset and files are the same after the block."""
    broker.ensure_topic(VICTIM)
    before = (broker.log_end_offset(VICTIM), broker.partition_files(VICTIM))
    yield
    assert (broker.log_end_offset(VICTIM), broker.partition_files(VICTIM)) == before
