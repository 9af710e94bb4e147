"""The consumer group protocol's broker properties (KIP-848), read from the broker's
``server.properties`` with Kafka 3.9's names, defaults and checks (``GroupCoordinatorConfig``):

  group.consumer.session.timeout.ms        45000, within [min, max] below
  group.consumer.min.session.timeout.ms    45000
  group.consumer.max.session.timeout.ms    60000
  group.consumer.heartbeat.interval.ms     5000, within [min, max] and below the session timeout
  group.consumer.min.heartbeat.interval.ms 5000
  group.consumer.max.heartbeat.interval.ms 15000
  group.consumer.max.size                  2147483647
  group.consumer.assignors                 uniform,range (Kafka's class names are accepted too)
  group.coordinator.rebalance.protocols    classic,consumer (Kafka 3.9: classic; see
                                           ``coordinator.group.consumer_heartbeat``)
  group.consumer.migration.policy          bidirectional (disabled, upgrade, downgrade)
"""

from __future__ import annotations

from collections.abc import Mapping

from pykraft.broker.config_listeners import BrokerConfigError
from pykraft.coordinator.group.assignors import RANGE_ASSIGNOR, UNIFORM_ASSIGNOR
from pykraft.coordinator.group.consumer_heartbeat import (
    CLASSIC_PROTOCOL,
    CONSUMER_PROTOCOL,
    ConsumerGroupConfig,
)

_ASSIGNOR_NAMES = {
    UNIFORM_ASSIGNOR: UNIFORM_ASSIGNOR,
    RANGE_ASSIGNOR: RANGE_ASSIGNOR,
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM_ASSIGNOR,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE_ASSIGNOR,
}
_MIGRATION_POLICIES = frozenset({"disabled", "upgrade", "downgrade", "bidirectional"})
_INTS = (
    ("session_timeout_ms", "group.consumer.session.timeout.ms", 1),
    ("min_session_timeout_ms", "group.consumer.min.session.timeout.ms", 1),
    ("max_session_timeout_ms", "group.consumer.max.session.timeout.ms", 1),
    ("heartbeat_interval_ms", "group.consumer.heartbeat.interval.ms", 1),
    ("min_heartbeat_interval_ms", "group.consumer.min.heartbeat.interval.ms", 1),
    ("max_heartbeat_interval_ms", "group.consumer.max.heartbeat.interval.ms", 1),
    ("max_size", "group.consumer.max.size", 1),
)


def consumer_group_config(values: Mapping[str, str]) -> ConsumerGroupConfig:
    """Raises ``BrokerConfigError`` naming the property Kafka would refuse."""
    defaults = ConsumerGroupConfig()
    fields: dict[str, object] = {}
    for field, name, minimum in _INTS:
        fields[field] = _int(values, name, getattr(defaults, field), minimum)
    fields["assignors"] = _assignors(values.get("group.consumer.assignors"), defaults.assignors)
    fields["rebalance_protocols"] = _protocols(
        values.get("group.coordinator.rebalance.protocols"), defaults.rebalance_protocols
    )
    policy = values.get("group.consumer.migration.policy", defaults.migration_policy)
    policy = policy.strip().lower()
    if policy not in _MIGRATION_POLICIES:
        raise BrokerConfigError(
            "group.consumer.migration.policy",
            f"{policy!r} is not one of {', '.join(sorted(_MIGRATION_POLICIES))}",
        )
    fields["migration_policy"] = policy
    config = ConsumerGroupConfig(**fields)  # type: ignore[arg-type]
    _check(config)
    return config


def _check(config: ConsumerGroupConfig) -> None:
    if (
        not config.min_session_timeout_ms
        <= config.session_timeout_ms
        <= config.max_session_timeout_ms
    ):
        raise BrokerConfigError(
            "group.consumer.session.timeout.ms",
            "must be within group.consumer.min.session.timeout.ms and "
            "group.consumer.max.session.timeout.ms",
        )
    if not (
        config.min_heartbeat_interval_ms
        <= config.heartbeat_interval_ms
        <= config.max_heartbeat_interval_ms
    ):
        raise BrokerConfigError(
            "group.consumer.heartbeat.interval.ms",
            "must be within group.consumer.min.heartbeat.interval.ms and "
            "group.consumer.max.heartbeat.interval.ms",
        )
    if config.heartbeat_interval_ms >= config.session_timeout_ms:
        raise BrokerConfigError(
            "group.consumer.heartbeat.interval.ms",
            "must be less than group.consumer.session.timeout.ms",
        )


def _int(values: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = values.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise BrokerConfigError(name, f"{raw!r} is not an integer") from None
    if not minimum <= value < 2**31:
        raise BrokerConfigError(name, f"{value} is outside [{minimum}, 2147483647]")
    return value


def _names(raw: str) -> list[str]:
    return [name.strip() for name in raw.split(",") if name.strip()]


def _assignors(raw: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    if raw is None:
        return default
    names = []
    for name in _names(raw):
        if name not in _ASSIGNOR_NAMES:
            raise BrokerConfigError("group.consumer.assignors", f"unknown assignor {name}")
        names.append(_ASSIGNOR_NAMES[name])
    if not names:
        raise BrokerConfigError("group.consumer.assignors", "at least one assignor is needed")
    return tuple(names)


def _protocols(raw: str | None, default: frozenset[str]) -> frozenset[str]:
    if raw is None:
        return default
    protocols = frozenset(name.lower() for name in _names(raw))
    unknown = protocols - {CLASSIC_PROTOCOL, CONSUMER_PROTOCOL}
    if unknown or CLASSIC_PROTOCOL not in protocols:
        raise BrokerConfigError(
            "group.coordinator.rebalance.protocols",
            "must list classic, and may add consumer",
        )
    return protocols
