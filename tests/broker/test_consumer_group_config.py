"""The ``group.consumer.*`` broker properties (KIP-848): Kafka 3.9's defaults and the checks of
``GroupCoordinatorConfig`` (``GroupCoordinatorConfigTest``)."""

from __future__ import annotations

import pytest

from pykraft.broker.config_listeners import BrokerConfigError
from pykraft.broker.consumer_group_config import consumer_group_config
from pykraft.coordinator.group.consumer_heartbeat import ConsumerGroupConfig


def test_defaults_are_kafkas() -> None:
    config = consumer_group_config({})
    assert config == ConsumerGroupConfig()
    assert (config.session_timeout_ms, config.heartbeat_interval_ms) == (45_000, 5_000)
    assert config.assignors == ("uniform", "range")
    assert config.max_size == 2**31 - 1
    assert config.rebalance_protocols == {"classic", "consumer"}
    assert config.migration_policy == "bidirectional"


def test_values_and_kafkas_class_names() -> None:
    config = consumer_group_config(
        {
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.max.size": "3",
            "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,"
            " uniform",
            "group.coordinator.rebalance.protocols": "classic",
            "group.consumer.migration.policy": "Upgrade",
        }
    )
    assert config.migration_policy == "upgrade"
    assert (config.heartbeat_interval_ms, config.max_size) == (500, 3)
    assert config.assignors == ("range", "uniform")
    assert config.rebalance_protocols == {"classic"}


@pytest.mark.parametrize(
    ("values", "name"),
    [
        ({"group.consumer.session.timeout.ms": "30000"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "100"}, "group.consumer.heartbeat.interval.ms"),
        (
            {
                "group.consumer.heartbeat.interval.ms": "50000",
                "group.consumer.max.heartbeat.interval.ms": "60000",
            },
            "group.consumer.heartbeat.interval.ms",
        ),
        ({"group.consumer.max.size": "0"}, "group.consumer.max.size"),
        ({"group.consumer.migration.policy": "sideways"}, "group.consumer.migration.policy"),
        ({"group.consumer.max.size": "many"}, "group.consumer.max.size"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
        ({"group.consumer.assignors": " , "}, "group.consumer.assignors"),
        (
            {"group.coordinator.rebalance.protocols": "consumer"},
            "group.coordinator.rebalance.protocols",
        ),
        (
            {"group.coordinator.rebalance.protocols": "classic,share"},
            "group.coordinator.rebalance.protocols",
        ),
    ],
)
def test_refused_values_name_their_property(values: dict[str, str], name: str) -> None:
    with pytest.raises(BrokerConfigError) as raised:
        consumer_group_config(values)
    assert raised.value.property_name == name
