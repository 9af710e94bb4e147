"""Kafka's ConnectionQuotas rules (max.connections, max.connections.per.ip and its overrides,
the protected inter-broker listener) and connections.max.idle.ms, as pure functions."""

from __future__ import annotations

import pytest

from pykraft.broker.connection_quotas import (
    DEFAULT_MAX_CONNECTIONS,
    Admission,
    ConnectionLimits,
    ConnectionQuotas,
    idle_connections,
    parse_per_ip_overrides,
    scan_interval_ms,
)


def quotas(listeners: tuple[str, ...] = ("PLAINTEXT",), **limits: int) -> ConnectionQuotas:
    overrides = limits.pop("overrides_127_0_0_9", None)
    limit = ConnectionLimits(
        **limits,
        max_connections_per_ip_overrides={"127.0.0.9": overrides} if overrides is not None else {},
    )
    result = ConnectionQuotas(limit, inter_broker_listener="REPLICATION")
    for name in listeners:
        result.add_listener(name)
    return result


def test_kafka_defaults_are_unlimited() -> None:
    # KafkaConfig: max.connections and max.connections.per.ip default to Integer.MAX_VALUE.
    assert ConnectionLimits().max_connections == DEFAULT_MAX_CONNECTIONS == 2**31 - 1
    assert ConnectionLimits().max_for("10.0.0.1") == 2**31 - 1


def test_the_acceptor_waits_at_max_connections_and_resumes_when_one_closes() -> None:
    q = quotas(max_connections=2)
    assert q.open("PLAINTEXT", "10.0.0.1") is Admission.OPEN
    assert q.slot_available("PLAINTEXT")
    assert q.open("PLAINTEXT", "10.0.0.2") is Admission.OPEN
    assert not q.slot_available("PLAINTEXT")
    q.close("PLAINTEXT", "10.0.0.1")
    assert q.slot_available("PLAINTEXT") and q.total == 1


def test_an_address_at_its_maximum_is_refused_and_nothing_is_counted() -> None:
    q = quotas(max_connections_per_ip=1)
    assert q.open("PLAINTEXT", "10.0.0.1") is Admission.OPEN
    assert q.open("PLAINTEXT", "10.0.0.1") is Admission.REFUSED_PER_IP
    assert (q.total, q.count("10.0.0.1")) == (1, 1)
    assert q.open("PLAINTEXT", "10.0.0.2") is Admission.OPEN
    q.close("PLAINTEXT", "10.0.0.1")
    assert q.open("PLAINTEXT", "10.0.0.1") is Admission.OPEN


def test_an_override_wins_over_the_per_ip_default_even_zero() -> None:
    q = quotas(max_connections_per_ip=0, overrides_127_0_0_9=2)
    assert q.open("PLAINTEXT", "10.0.0.1") is Admission.REFUSED_PER_IP
    assert q.open("PLAINTEXT", "127.0.0.9") is Admission.OPEN
    assert q.open("PLAINTEXT", "127.0.0.9") is Admission.OPEN
    assert q.open("PLAINTEXT", "127.0.0.9") is Admission.REFUSED_PER_IP


def test_the_inter_broker_listener_is_protected_only_beside_another_listener() -> None:
    # ConnectionQuotas.protectedListener: interBrokerListenerName == name && listeners > 1.
    alone = quotas(("REPLICATION",), max_connections=1)
    alone.open("REPLICATION", "10.0.0.1")
    assert not alone.slot_available("REPLICATION")

    both = quotas(("PLAINTEXT", "REPLICATION"), max_connections=1)
    both.open("PLAINTEXT", "10.0.0.1")
    assert not both.slot_available("PLAINTEXT")
    assert both.slot_available("REPLICATION")
    both.open("REPLICATION", "10.0.0.2")
    # The other listener closes its least recently used connection (closeExcessConnections).
    assert both.excess_connections("PLAINTEXT") == 1
    assert both.excess_connections("REPLICATION") == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("hostName:100,127.0.0.1:200", {"hostName": 100, "127.0.0.1": 200}),  # Kafka's example
        (" [::1]:5 , 10.0.0.1:0 ", {"::1": 5, "10.0.0.1": 0}),
    ],
)
def test_per_ip_overrides_parse(text: str, expected: dict[str, int]) -> None:
    assert dict(parse_per_ip_overrides(text)) == expected


@pytest.mark.parametrize("text", ["host", "host:", ":5", "host:-1", "host:many"])
def test_bad_per_ip_overrides_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="host:count"):
        parse_per_ip_overrides(text)


def test_idle_connections_are_those_silent_too_long_with_nothing_in_flight() -> None:
    connections = [("quiet", 1_000, False), ("recent", 9_500, False), ("serving", 0, True)]
    assert idle_connections(connections, now_ms=10_001, max_idle_ms=9_000) == ["quiet"]
    assert idle_connections(connections, now_ms=10_000, max_idle_ms=9_000) == []


@pytest.mark.parametrize(("max_idle_ms", "interval_ms"), [(600_000, 5_000), (2_000, 500), (1, 10)])
def test_idle_scan_interval(max_idle_ms: int, interval_ms: int) -> None:
    assert scan_interval_ms(max_idle_ms) == interval_ms
