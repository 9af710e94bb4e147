"""The group coordinator's settings from the broker's properties (``coordinators.group_config``):
KIP-211's ``offsets.retention.minutes`` (Kafka's default 10080, at least 1) and
``offsets.retention.check.interval.ms`` (600000, at least 1) reach ``GroupConfig`` in ms."""

from __future__ import annotations

from pykraft.broker.config import BrokerConfig
from pykraft.broker.coordinators import group_config
from pykraft.coordinator.group.rebalance import GroupConfig
from tests.broker.test_config import BASE, check_error


def test_offset_retention_defaults_are_kafkas() -> None:
    config = BrokerConfig.from_properties(BASE)
    assert config.offsets_retention_minutes == 10_080
    assert config.offsets_retention_check_interval_ms == 600_000
    group = group_config(config)
    assert group.offsets_retention_ms == 7 * 24 * 3600 * 1000 == GroupConfig().offsets_retention_ms
    assert group.offsets_retention_check_interval_ms == 600_000


def test_offset_retention_properties_reach_the_group_coordinator() -> None:
    config = BrokerConfig.from_properties(
        {
            **BASE,
            "offsets.retention.minutes": "1",
            "offsets.retention.check.interval.ms": "250",
        }
    )
    group = group_config(config)
    assert (group.offsets_retention_ms, group.offsets_retention_check_interval_ms) == (60_000, 250)


def test_offset_retention_below_one_names_the_property() -> None:
    check_error({"offsets.retention.minutes": "0"}, "offsets.retention.minutes", "")
    check_error(
        {"offsets.retention.check.interval.ms": "0"}, "offsets.retention.check.interval.ms", ""
    )
