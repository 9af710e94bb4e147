"""What ``export-topic`` reads from: one pipeline (``export.export_topic_job``: staging, the
output check, the manifest commit), two sources, each planning a run and reading exactly its
ranges — ``export_topic_job.LogDirsSource`` (``--log-dirs``) and
``kafka_export_plan.KafkaExportSource`` (``--bootstrap-server``)."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

from pykraft.export.isolation import IsolationLevel
from pykraft.export.manifest import ExportedRange, ExportPlan, Manifest


class ExportArgumentError(ValueError):
    """Options that do not go together."""


class ExportSource(Protocol):
    name: ClassVar[str]  # recorded in the manifest (``manifest.SOURCE_FLAGS``)

    def where(self, topic: str) -> str:
        """What planning reads, for the progress line."""
        ...

    def plan(
        self, manifest: Manifest, topic: str, isolation_level: IsolationLevel
    ) -> tuple[ExportPlan, tuple[ExportedRange, ...]]:
        """The run's plan and the ranges held back for an open transaction."""
        ...

    def read(
        self, spark: Any, topic: str, plan: ExportPlan, isolation_level: IsolationLevel
    ) -> Any:
        """A DataFrame of exactly the planned ranges, in the export's columns."""
        ...
