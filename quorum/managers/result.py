"""``ControllerResult``: the records a request writes, as one atomic batch, and its response."""

from __future__ import annotations

from typing import Generic, TypeVar

import attrs

from pykraft.metadata.records import MetadataRecord

R = TypeVar("R")


@attrs.frozen
class ControllerResult(Generic[R]):
    """Records to append atomically (possibly none) and the response to send once they commit.

    A request that fails validation has no records; partial success (e.g. some topics of a
    CreateTopics request) writes the records of the parts that succeeded, in one batch.
    """

    records: tuple[MetadataRecord, ...]
    response: R
