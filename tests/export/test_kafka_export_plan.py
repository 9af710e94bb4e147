"""``export-topic --bootstrap-server``'s planner, with the brokers' answers (Metadata,
ListOffsets) scripted as the source's tests script them; its options, columns and manifest
records (pure: no Spark, no brokers)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from pykraft import spark_cmd
from pykraft.command_config import CommandConfigError
from pykraft.export.export_source import ExportArgumentError
from pykraft.export.export_topic_job import LogDirsSource, source_of
from pykraft.export.isolation import IsolationLevel
from pykraft.export.kafka_export_plan import (
    EXPORT_COLUMNS,
    KafkaExportSource,
    TopicNotFoundError,
    plan_kafka_export,
)
from pykraft.export.kafka_options import parse_batch_options
from pykraft.export.kafka_plan import DataLossError, DescribedTopic
from pykraft.export.manifest import (
    KAFKA_SOURCE,
    LOG_DIRS_SOURCE,
    ExportedRange,
    ExportPlan,
    Manifest,
    ManifestError,
    begin_run,
    commit_run,
    encode_manifest,
    manifest_from_bytes,
)
from pykraft.storage.topic_partition import TopicPartition

RC, RU = IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED
TOPIC_ID = "y2GxlZ8qS8uuxYzXcWw6nA"


def planned(*ranges: ExportedRange, empty: tuple[ExportedRange, ...] = ()) -> ExportPlan:
    return ExportPlan(ranges, empty=empty, topic_id=TOPIC_ID)


@attrs.define
class Brokers:
    """The ``KafkaOffsetReader`` double at one isolation level: ``latest`` is the last stable
    offset under read_committed, the high watermark under read_uncommitted, as ListOffsets
    answers them."""

    isolation_level: IsolationLevel
    counts: dict[str, int] = attrs.Factory(lambda: {"t": 2, "other": 1})
    log_start: dict[int, int] = attrs.Factory(lambda: {0: 0, 1: 5})
    high_watermark: dict[int, int] = attrs.Factory(lambda: {0: 100, 1: 15})
    last_stable: dict[int, int] = attrs.Factory(lambda: {0: 80, 1: 15})
    topic_id: str = TOPIC_ID

    def describe_topic(self, topic: str) -> DescribedTopic | None:
        count = self.counts.get(topic)
        return None if count is None else DescribedTopic(self.topic_id, count)

    def earliest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        assert all(tp.topic == "t" for tp in tps)
        return {tp: self.log_start[tp.partition] for tp in tps}

    def latest(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        ends = self.last_stable if self.isolation_level is RC else self.high_watermark
        return {tp: ends[tp.partition] for tp in tps}


def committed(*ranges: tuple[int, int, int], topic_id: str | None = None) -> Manifest:
    exported = tuple(ExportedRange(p, s, e) for p, s, e in ranges)
    manifest = Manifest("t", source=KAFKA_SOURCE, topic_id=topic_id)
    return commit_run(begin_run(manifest, 1, exported, 0), 1)


def test_first_run_reads_from_log_start_to_the_isolation_levels_end() -> None:
    empty = Manifest("t", source=KAFKA_SOURCE)
    assert plan_kafka_export(empty, "t", Brokers(RC)) == planned(
        ExportedRange(0, 0, 80), ExportedRange(1, 5, 15)
    )
    assert plan_kafka_export(empty, "t", Brokers(RU)) == planned(
        ExportedRange(0, 0, 100), ExportedRange(1, 5, 15)
    )


def test_rerun_starts_at_the_committed_end_and_skips_unchanged_partitions() -> None:
    manifest = committed((0, 0, 60), (1, 5, 15))
    assert plan_kafka_export(manifest, "t", Brokers(RC)) == planned(ExportedRange(0, 60, 80))
    # Everything exported: nothing to do (the export says "up to date").
    done = committed((0, 0, 80), (1, 5, 15))
    assert plan_kafka_export(done, "t", Brokers(RC)) == planned()


def test_partitions_added_since_start_at_offset_0_or_lost_records() -> None:
    brokers = Brokers(RU, counts={"t": 3})
    brokers.log_start[2], brokers.high_watermark[2] = 0, 9
    manifest = committed((0, 0, 100), (1, 5, 15))
    assert plan_kafka_export(manifest, "t", brokers) == planned(ExportedRange(2, 0, 9))
    # Spark's "Added partition t-2 starts from 7 instead of 0": records 0..6 were removed.
    brokers.log_start[2] = 7
    with pytest.raises(DataLossError, match=r"offsets 0\.\.6 of t-2 were removed from the log"):
        plan_kafka_export(manifest, "t", brokers)


def test_an_empty_partition_is_recorded_so_later_losses_are_seen() -> None:
    """Review 2 (empty_partition_loss.py): partition 1 is empty at run 1; records 0..99 arrive
    and retention removes 0..49 before run 2, which must not start at 50 silently."""
    first = Brokers(RU, log_start={0: 0, 1: 0}, high_watermark={0: 10, 1: 0})
    plan = plan_kafka_export(Manifest("t", source=KAFKA_SOURCE), "t", first)
    assert plan == planned(ExportedRange(0, 0, 10), empty=(ExportedRange(1, 0, 0),))
    manifest = committed((0, 0, 10), (1, 0, 0))
    trimmed = Brokers(RU, log_start={0: 0, 1: 50}, high_watermark={0: 10, 1: 100})
    with pytest.raises(DataLossError, match=r"offsets 0\.\.49 of t-1 were removed"):
        plan_kafka_export(manifest, "t", trimmed)
    # Its first records arriving, nothing removed: read from 0.
    grown = Brokers(RU, log_start={0: 0, 1: 0}, high_watermark={0: 10, 1: 100})
    assert plan_kafka_export(manifest, "t", grown) == planned(ExportedRange(1, 0, 100))
    # A manifest written before empty partitions were recorded: still caught.
    with pytest.raises(DataLossError, match=r"offsets 0\.\.49 of t-1 were removed"):
        plan_kafka_export(committed((0, 0, 10)), "t", trimmed)


def test_a_recreated_topic_is_data_loss_even_when_it_holds_as_many_offsets() -> None:
    brokers = Brokers(RU)  # as many offsets as were exported: offsets alone cannot tell
    plan = plan_kafka_export(committed((0, 0, 60), (1, 5, 15), topic_id=TOPIC_ID), "t", brokers)
    assert plan == planned(ExportedRange(0, 60, 100))
    brokers.topic_id = "AAAAAAAAAAAAAAAAAAAAAA"  # deleted and created again
    with pytest.raises(DataLossError, match=r"topic t was deleted and recreated") as error:
        plan_kafka_export(committed((0, 0, 60), (1, 5, 15), topic_id=TOPIC_ID), "t", brokers)
    assert TOPIC_ID in str(error.value) and "nothing was exported or committed" in str(error.value)
    # A manifest from before topic ids were recorded takes the current one (its next run
    # records it).
    assert (
        plan_kafka_export(committed((0, 0, 60), (1, 5, 15)), "t", brokers).topic_id
        == brokers.topic_id
    )


def test_the_topic_id_is_recorded_in_the_manifest() -> None:
    manifest = committed((0, 0, 10), topic_id=TOPIC_ID)
    encoded = encode_manifest(manifest)
    assert json.loads(encoded)["topicId"] == TOPIC_ID
    assert manifest_from_bytes(encoded, "out", "t", RC, KAFKA_SOURCE).topic_id == TOPIC_ID
    older = encode_manifest(committed((0, 0, 10)))
    assert "topicId" not in json.loads(older)
    assert manifest_from_bytes(older, "out", "t", RC, KAFKA_SOURCE).topic_id is None


def test_log_start_past_the_committed_end_is_data_loss() -> None:
    brokers = Brokers(RC)
    brokers.log_start[0] = 70  # retention or DeleteRecords removed 60..69, never exported
    with pytest.raises(DataLossError) as error:
        plan_kafka_export(committed((0, 0, 60), (1, 5, 15)), "t", brokers)
    message = str(error.value)
    assert "offsets 60..69 of t-0 were removed from the log (it starts at 70)" in message
    assert "nothing was exported or committed" in message
    # Exactly at the committed end: nothing lost.
    brokers.log_start[0] = 60
    plan = plan_kafka_export(committed((0, 0, 60), (1, 5, 15)), "t", brokers)
    assert plan == planned(ExportedRange(0, 60, 80))


def test_a_partition_ending_before_the_committed_end_or_gone_is_data_loss() -> None:
    recreated = Brokers(RU, log_start={0: 0, 1: 0}, high_watermark={0: 3, 1: 15})
    with pytest.raises(DataLossError, match=r"t-0 ends at offset 3, before the 60 already"):
        plan_kafka_export(committed((0, 0, 60)), "t", recreated)
    fewer = Brokers(RU, counts={"t": 1})
    with pytest.raises(DataLossError, match=r"partition t-1 is gone \(exported up to offset 15\)"):
        plan_kafka_export(committed((0, 0, 60), (1, 5, 15)), "t", fewer)


def test_a_topic_the_brokers_do_not_have_is_an_error() -> None:
    with pytest.raises(TopicNotFoundError, match="'nope'"):
        plan_kafka_export(Manifest("nope", source=KAFKA_SOURCE), "nope", Brokers(RC))


def test_the_manifest_records_the_kafka_source_and_refuses_mixing() -> None:
    kafka = encode_manifest(committed((0, 0, 10)))
    log_dirs = encode_manifest(attrs.evolve(committed((0, 0, 10)), source=LOG_DIRS_SOURCE))
    assert b'"source": "kafka"' in kafka
    assert b'"source"' not in log_dirs  # the file path's manifests are as before
    # A version-1 reader would ignore "source" and mix schemas: such a manifest is version 2.
    assert json.loads(kafka)["version"] == 2
    assert json.loads(log_dirs)["version"] == 1
    assert manifest_from_bytes(kafka, "out", "t", RC, KAFKA_SOURCE).next_offsets() == {0: 10}
    with pytest.raises(ManifestError, match=r"with --bootstrap-server.*differ from --log-dirs"):
        manifest_from_bytes(kafka, "out", "t", RC, LOG_DIRS_SOURCE)
    with pytest.raises(ManifestError, match=r"read with --log-dirs.*use another --out directory"):
        manifest_from_bytes(log_dirs, "out", "t", RC, KAFKA_SOURCE)
    with pytest.raises(ManifestError, match="source 'disk' is not known"):
        manifest_from_bytes(kafka.replace(b'"kafka"', b'"disk"'), "out", "t", RC, KAFKA_SOURCE)


def test_output_columns_are_the_file_sources_that_kafka_carries() -> None:
    assert EXPORT_COLUMNS == (
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestamp_type",
        "key",
        "value",
        "headers",
    )


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pykraft spark")
    spark_cmd.add_arguments(parser)
    return parser.parse_args(["export-topic", "--topic", "t", "--out", "o", *argv])


def test_exactly_one_source(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse([])
    assert "one of the arguments --log-dirs --bootstrap-server is required" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        parse(["--log-dirs", "d", "--bootstrap-server", "b:9092"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert source_of(parse(["--log-dirs", "d"])) == LogDirsSource(str(Path.cwd() / "d"))
    with pytest.raises(ExportArgumentError, match="--command-config configures the Kafka client"):
        source_of(parse(["--log-dirs", "d", "--command-config", str(tmp_path / "c")]))


def test_command_config_becomes_the_sources_kafka_options(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "client.id=exporter\nssl.truststore.type=PEM\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="secret";\n'
    )
    source = source_of(parse(["--bootstrap-server", "b1:9093,b2:9093"]))
    assert source == KafkaExportSource("b1:9093,b2:9093", {})
    missing = str(tmp_path / "missing.properties")
    with pytest.raises(CommandConfigError, match=r"missing\.properties"):
        source_of(parse(["--bootstrap-server", "b:9092", "--command-config", missing]))
    source = source_of(
        parse(["--bootstrap-server", "b1:9093,b2:9093", "--command-config", str(config)])
    )
    assert isinstance(source, KafkaExportSource)
    options = source.options(RU)
    assert options == {
        "kafka.bootstrap.servers": "b1:9093,b2:9093",
        "kafka.client.id": "exporter",
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanisms": "SCRAM-SHA-256",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": "secret",
        "isolation.level": "read_uncommitted",
    }
    assert "secret" not in repr(source)
    # The source takes them as they are (Java-only names never reach it).
    parsed = parse_batch_options({k.lower(): v for k, v in options.items()} | {"subscribe": "t"})
    assert parsed.consumer_config["sasl.username"] == "alice"
    assert parsed.isolation_level is RU
