"""Errors raised by the metadata core when a record cannot be applied."""

from __future__ import annotations

from typing import Any


class MetadataReplayError(ValueError):
    """A record refers to something the image does not hold, or contradicts it.

    The controller never proposes such records; a broker that sees one must stop applying the
    log rather than silently corrupt its image. ``record`` is the offending record.
    """

    def __init__(self, record: Any, message: str) -> None:
        super().__init__(f"cannot replay {type(record).__name__}: {message}")
        self.record = record
