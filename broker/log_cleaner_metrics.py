"""The log cleaner's gauges in Kafka's names, as the Prometheus JMX exporter names them.

Kafka's ``LogCleaner`` registers ``kafka.log:type=LogCleaner,name=max-clean-time-secs`` (the
last cleaning's elapsed seconds, as an int, the max over cleaner threads) and
``cleaner-recopy-percent`` (100 x bytes written / bytes read of the last cleaning, averaged
over threads); its ``LogCleanerManager`` registers ``max-dirty-percent`` (100 x the highest
dirty ratio among compacted logs holding bytes, from the last ``grabFilthiestCompactedLog``)
and ``uncleanable-partitions-count`` per ``logDirectory`` (the dir's absolute path). The JMX
exporter's rules (``kafka-2_0_0.yml``: ``kafka.(\\w+)<type=(.+), name=(.+)><>Value`` →
``kafka_$1_$2_$3``, lower-cased, ``-`` to ``_``) give ``kafka_log_logcleaner_max_clean_time_secs``
and so on. pykraft runs one cleaner thread, so max and average are that thread's numbers.

``broker.log_cleaner.LogCleanerShell`` calls ``record_round`` on the event loop after each
round; pure bookkeeping here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pykraft.metadata.prometheus import Family, Gauge

if TYPE_CHECKING:  # storage.cleaner is a file shell; only its stats' type is needed here
    from pykraft.storage.cleaner import CleanerStats


class LogCleanerMetrics:
    """Kafka's ``LogCleaner`` and ``LogCleanerManager`` gauges."""

    def __init__(self) -> None:
        self.max_clean_time_secs = Gauge(
            "kafka_log_logcleaner_max_clean_time_secs",
            "Seconds the last cleaning took, whole (LogCleaner max-clean-time-secs).",
        )
        self.cleaner_recopy_percent = Gauge(
            "kafka_log_logcleaner_cleaner_recopy_percent",
            "Bytes written as a whole percentage of bytes read by the last cleaning "
            "(LogCleaner cleaner-recopy-percent).",
        )
        self.max_dirty_percent = Gauge(
            "kafka_log_logcleanermanager_max_dirty_percent",
            "The highest dirty ratio of a compacted log, whole percent, at the last round "
            "(LogCleanerManager max-dirty-percent).",
        )
        self.uncleanable_partitions_count = Gauge(
            "kafka_log_logcleanermanager_uncleanable_partitions_count",
            "Partitions whose cleaning failed, skipped until restart, per log dir "
            "(LogCleanerManager uncleanable-partitions-count).",
            ("logDirectory",),
        )

    def families(self) -> tuple[Family, ...]:
        return (
            self.max_clean_time_secs,
            self.cleaner_recopy_percent,
            self.max_dirty_percent,
            self.uncleanable_partitions_count,
        )

    def record_round(
        self,
        *,
        max_dirty_ratio: float,
        uncleanable: Mapping[Path, int],
        cleaned: CleanerStats | None = None,
        clean_time_ms: int = 0,
    ) -> None:
        """After a round: the dirtiest ratio it saw and the uncleanable partitions per dir;
        with ``cleaned``, the stats of the cleaning it did and how long it took."""
        self.max_dirty_percent.set(int(100 * max_dirty_ratio))
        for log_dir, count in uncleanable.items():
            self.uncleanable_partitions_count.set(count, str(log_dir.absolute()))
        if cleaned is not None:
            self.max_clean_time_secs.set(clean_time_ms // 1000)
            recopy = cleaned.bytes_written / max(cleaned.bytes_read, 1)
            self.cleaner_recopy_percent.set(int(100 * recopy))
