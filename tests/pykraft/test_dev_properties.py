"""``pykraft dev --controller-property / --broker-property``: extra properties reach every file
of that role, the layout's own properties cannot be overridden, and malformed pairs are usage
errors. No process is started and no port is opened: ``prepare`` only writes files."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pykraft.dev import (
    DevCluster,
    DevClusterError,
    add_arguments,
    check_overrides,
    internal_topic_properties,
    parse_property,
    plan_layout,
)
from pykraft.properties import Properties

LAYOUT = plan_layout(1, 2, 0, free_ports=[19001, 19002, 19003, 19004, 19005, 19006])


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


def file_of(cluster: DevCluster, name: str) -> Properties:
    return Properties.parse((cluster.data_dir / "config" / f"{name}.properties").read_text())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "metadata.log.max.records.between.snapshots=50",
            ("metadata.log.max.records.between.snapshots", "50"),
        ),
        (" num.partitions = 3 ", ("num.partitions", "3")),
        ("log.retention.ms=", ("log.retention.ms", "")),  # an empty value, as in a .properties file
        ("a=b=c", ("a", "b=c")),  # only the first = separates
    ],
)
def test_parse_property(text: str, expected: tuple[str, str]) -> None:
    assert parse_property(text) == expected


@pytest.mark.parametrize("text", ["no-equals-sign", "=value", " =x"])
def test_malformed_property_is_a_usage_error(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--broker-property", text)
    assert exit_info.value.code == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_options_repeat_and_default_to_nothing() -> None:
    args = parse("--controller-property", "a=1", "--controller-property", "b=2")
    assert args.controller_property == [("a", "1"), ("b", "2")]
    assert args.broker_property == []


@pytest.mark.parametrize(
    ("role", "key"),
    [
        ("controller", "node.id"),
        ("controller", "controller.quorum.voters"),
        ("controller", "listeners"),
        ("controller", "metadata.log.dir"),
        ("controller", "controller.quorum.password.file"),
        ("broker", "node.id"),
        ("broker", "log.dirs"),
        ("broker", "cluster.id"),
        ("broker", "controller.quorum.bootstrap.servers"),
        ("broker", "http.listener"),
    ],
)
def test_layout_properties_are_refused(role: str, key: str) -> None:
    with pytest.raises(DevClusterError, match=f"--{role}-property {key}: pykraft dev sets"):
        check_overrides(LAYOUT, role, [(key, "7")])


def test_a_default_of_dev_may_be_overridden_and_the_last_value_wins() -> None:
    pairs = [
        ("offsets.topic.replication.factor", "1"),
        ("num.partitions", "2"),
        ("num.partitions", "4"),
    ]
    assert check_overrides(LAYOUT, "broker", pairs) == {
        "offsets.topic.replication.factor": "1",
        "num.partitions": "4",
    }


def test_prepare_writes_each_role_its_own_extra_properties(tmp_path: Path) -> None:
    cluster = DevCluster(
        LAYOUT,
        tmp_path,
        {
            "controller": {"metadata.log.max.records.between.snapshots": "50"},
            "broker": {
                "replica.high.watermark.checkpoint.interval.ms": "500",
                "offsets.topic.replication.factor": "1",
            },
        },
    )
    cluster.prepare()
    controller = file_of(cluster, "controller-1")
    assert controller.get_int("metadata.log.max.records.between.snapshots") == 50
    assert controller.get_int("node.id") == 1  # the layout's own properties stay
    for name in ("broker-10", "broker-11"):
        broker = file_of(cluster, name)
        assert broker.get_int("replica.high.watermark.checkpoint.interval.ms") == 500
        assert broker.get_int("offsets.topic.replication.factor") == 1  # was min(3, 2) = 2
        assert broker.get_int("metadata.log.max.records.between.snapshots", -1) == -1


def test_without_overrides_the_files_are_unchanged(tmp_path: Path) -> None:
    plain, extra = DevCluster(LAYOUT, tmp_path / "a"), DevCluster(LAYOUT, tmp_path / "b", {})
    plain.prepare()
    extra.prepare()
    broker = file_of(plain, "broker-10")
    assert broker.get_int("offsets.topic.replication.factor") == 2
    assert broker.get_str("log.dirs") == str(tmp_path / "a" / "broker-10")
    assert file_of(extra, "broker-10").get_int("offsets.topic.replication.factor") == 2


@pytest.mark.parametrize(
    ("brokers", "factor", "min_isr"), [(1, "1", "1"), (2, "2", "2"), (3, "3", "2"), (5, "3", "2")]
)
def test_internal_topics_fit_the_cluster(brokers: int, factor: str, min_isr: str) -> None:
    # Internal topics are created only once as many brokers as their replication factor are
    # alive (Kafka's hasEnoughLiveBrokers): a smaller dev cluster must ask for fewer.
    assert internal_topic_properties(brokers) == {
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": min_isr,
    }
