"""How the log manager tells the log cleaner that a log changed under it (Kafka's
``LogManager`` calls into ``LogCleaner``): a truncation (``truncateTo`` and
``truncateFullyAndStartAt``: ``abortAndPauseCleaning``, then
``maybeTruncateCheckpoint`` to the active segment's base offset, then ``resumeCleaning``) and a
deletion (``asyncDelete``: ``abortCleaning`` and the checkpoint entry dropped). A partition
with a future log (``alterReplicaLogDirs``) is not cleaned: the cleaner asks
``LogManager.has_future_log``.

``storage.log_cleaner.LogCleaner`` implements ``CleanerHooks``; ``LogManager.cleaner`` holds it
(None while no cleaner runs, or with ``log.cleaner.enable=false``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import attrs

from pykraft.storage.topic_partition import TopicPartition


class CleanerHooks(Protocol):
    def abort_and_pause(self, tp: TopicPartition) -> None: ...

    def resume(self, tp: TopicPartition) -> None: ...

    def maybe_truncate_checkpoint(self, tp: TopicPartition, offset: int) -> None: ...

    def forget(self, tp: TopicPartition) -> None: ...


@attrs.frozen
class CleanerTruncationListener:
    """A log's ``truncation_listener`` (``storage.unified_log``): pauses the partition's
    cleaning for the truncation and moves its cleaner checkpoint back after it."""

    tp: TopicPartition
    cleaner: Callable[[], CleanerHooks | None]  # the cleaner of the moment

    def before_truncation(self) -> None:
        cleaner = self.cleaner()
        if cleaner is not None:
            cleaner.abort_and_pause(self.tp)

    def after_truncation(self, active_segment_base_offset: int) -> None:
        cleaner = self.cleaner()
        if cleaner is not None:
            cleaner.maybe_truncate_checkpoint(self.tp, active_segment_base_offset)
            cleaner.resume(self.tp)
