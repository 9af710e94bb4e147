"""BrokerConfig: Kafka's property names and defaults (KafkaConfig / ServerConfigs), named errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.config import BrokerConfig, BrokerConfigError, Endpoint, HostPort
from pykraft.storage.log_config import CleanupPolicy, LogConfig

BASE = {"node.id": "1", "controller.quorum.bootstrap.servers": "127.0.0.1:19093"}


def config(**overrides: str) -> BrokerConfig:
    values = dict(BASE)
    values.update({name.replace("_", "."): value for name, value in overrides.items()})
    return BrokerConfig.from_properties(values)


def check_error(values: dict[str, str], property_name: str, fragment: str) -> None:
    with pytest.raises(BrokerConfigError) as raised:
        BrokerConfig.from_properties({**BASE, **values})
    assert raised.value.property_name == property_name
    assert property_name in str(raised.value) and fragment in str(raised.value)


def test_kafka_defaults() -> None:
    c = BrokerConfig.from_properties(BASE)
    assert c.node_id == 1
    assert c.listeners == (Endpoint("PLAINTEXT", "127.0.0.1", 9092),)
    assert c.advertised_listeners == c.listeners
    assert c.log_dirs == (Path("/tmp/kafka-logs"),)
    assert (c.num_partitions, c.default_replication_factor, c.min_insync_replicas) == (1, 1, 1)
    assert c.socket_request_max_bytes == 100 * 1024 * 1024
    assert (c.broker_heartbeat_interval_ms, c.broker_session_timeout_ms) == (2000, 9000)
    assert c.num_replica_fetchers == 1
    assert c.replica_lag_time_max_ms == 30_000
    assert c.replica_fetch_wait_max_ms == 500
    assert c.replica_fetch_max_bytes == 1024 * 1024
    assert c.replica_high_watermark_checkpoint_interval_ms == 5000
    assert c.offsets_topic_num_partitions == 50
    assert c.offsets_topic_replication_factor == 3
    assert c.group_initial_rebalance_delay_ms == 3000
    assert c.group_min_session_timeout_ms == 6000
    assert c.log_config.segment_bytes == 1024**3
    assert c.log_config.index_interval_bytes == 4096
    assert c.log_config.retention_ms == 168 * 3600 * 1000
    assert c.log_config.retention_bytes == -1
    assert c.rack is None
    assert c.http_listener == HostPort("127.0.0.1", 8092)
    # Kafka's default (issue 13); issue #4 had it off.
    assert c.auto_create_topics_enable is True
    assert c.transaction_partition_verification_enable is True  # Kafka 3.6+'s default


def test_values_are_read_with_kafkas_names() -> None:
    c = BrokerConfig.from_properties(
        {
            **BASE,
            "listeners": "PLAINTEXT://0.0.0.0:9192,INTERNAL://127.0.0.1:9193",
            "advertised.listeners": "PLAINTEXT://kafka-1:9192,INTERNAL://127.0.0.1:9193",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": "/data/a, /data/b",
            "broker.rack": "rack-1",
            "num.partitions": "3",
            "min.insync.replicas": "2",
            "auto.create.topics.enable": "FALSE",
            "default.replication.factor": "2",
            "transaction.partition.verification.enable": "false",
            "log.segment.bytes": "1048576",
            "log.retention.hours": "1",
            "log.index.interval.bytes": "1024",
            "http.listener": "127.0.0.1:0",
        }
    )
    assert c.listeners[0] == Endpoint("PLAINTEXT", "0.0.0.0", 9192)
    assert c.inter_broker_endpoint == Endpoint("INTERNAL", "127.0.0.1", 9193)
    assert c.log_dirs == (Path("/data/a"), Path("/data/b"))
    assert c.rack == "rack-1"
    assert (c.num_partitions, c.min_insync_replicas) == (3, 2)
    assert c.default_replication_factor == 2
    assert c.auto_create_topics_enable is False
    assert c.transaction_partition_verification_enable is False
    assert c.log_config.segment_bytes == 1048576
    assert c.log_config.retention_ms == 3600 * 1000
    assert c.log_config.index_interval_bytes == 1024
    assert c.http_listener == HostPort("127.0.0.1", 0)


def test_log_cleanup_policy_is_the_broker_wide_default() -> None:
    # KafkaConfig log.cleanup.policy (LIST, default delete, ValidList.in(compact, delete)) is
    # the default of every topic's cleanup.policy (ServerTopicConfigSynonyms).
    assert config().log_config.cleanup_policy == {CleanupPolicy.DELETE}
    compact = config(**{"log.cleanup.policy": "compact"}).log_config
    assert compact.cleanup_policy == {CleanupPolicy.COMPACT}
    assert compact.compact and not compact.delete
    both = config(**{"log.cleanup.policy": "compact, delete"}).log_config
    assert both.cleanup_policy == {CleanupPolicy.COMPACT, CleanupPolicy.DELETE}
    # A topic's own cleanup.policy still wins over the broker default.
    topic = LogConfig.from_properties({"cleanup.policy": "delete"}, defaults=compact)
    assert topic.cleanup_policy == {CleanupPolicy.DELETE}


def test_a_topic_level_name_in_the_broker_file_is_not_a_broker_default() -> None:
    # Kafka reads log.cleanup.policy from server.properties; cleanup.policy there is unused.
    assert config(**{"cleanup.policy": "compact"}).log_config.cleanup_policy == {
        CleanupPolicy.DELETE
    }


def test_retention_ms_wins_over_hours() -> None:
    # KafkaConfig: log.retention.ms, then .minutes, then .hours.
    c = config(**{"log.retention.ms": "1000", "log.retention.hours": "5"})
    assert c.log_config.retention_ms == 1000
    assert config(**{"log.retention.hours": "-1"}).log_config.retention_ms == -1


def test_controller_addresses() -> None:
    c = config(**{"controller.quorum.bootstrap.servers": "127.0.0.1:19093, [::1]:19094"})
    assert [h.url for h in c.controller_bootstrap_servers] == [
        "http://127.0.0.1:19093",
        "http://[::1]:19094",
    ]
    voters = BrokerConfig.from_properties(
        {"node.id": "4", "controller.quorum.http.voters": "1@127.0.0.1:19093,2@127.0.0.1:19094"}
    )
    assert [h.port for h in voters.controller_bootstrap_servers] == [19093, 19094]


def test_broker_id_is_an_alias_of_node_id() -> None:
    values = {"broker.id": "7", "controller.quorum.bootstrap.servers": "127.0.0.1:1"}
    assert BrokerConfig.from_properties(values).node_id == 7


def test_a_listener_on_port_zero_is_advertised_with_its_bound_port_later() -> None:
    assert config(listeners="PLAINTEXT://127.0.0.1:0").advertised_listeners[0].port == 0


@pytest.mark.parametrize(
    ("values", "property_name", "fragment"),
    [
        ({"node.id": "one"}, "node.id", "not an integer"),
        ({"node.id": "-1"}, "node.id", "below the minimum 0"),
        ({"node.id": "1", "broker.id": "2"}, "broker.id", "differs from node.id=1"),
        ({"num.partitions": "0"}, "num.partitions", "below the minimum 1"),
        ({"min.insync.replicas": "2.5"}, "min.insync.replicas", "not an integer"),
        ({"socket.request.max.bytes": "4294967296"}, "socket.request.max.bytes", "32-bit"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable", "true or false"),
        (
            {"transaction.partition.verification.enable": "1"},
            "transaction.partition.verification.enable",
            "true or false",
        ),
        ({"max.connections": "-1"}, "max.connections", "below the minimum 0"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip", "overrides"),
        ({"max.connections.per.ip.overrides": "h"}, "max.connections.per.ip.overrides", "count"),
        ({"connections.max.idle.ms": "0"}, "connections.max.idle.ms", "below the minimum 1"),
        ({"listeners": "127.0.0.1:9092"}, "listeners", "NAME://host:port"),
        ({"listeners": "PLAINTEXT://127.0.0.1:port"}, "listeners", "host:port"),
        (
            {"listeners": "SSL://127.0.0.1:9093"},
            "listener.name.ssl.ssl.keystore.location",
            "needs a key store",
        ),
        ({"listeners": "EXTERNAL://127.0.0.1:9093"}, "listeners", "no entry in"),
        (
            {"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"},
            "listeners",
            "listed twice",
        ),
        ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners", "cannot advertise"),
        ({"advertised.listeners": "PLAINTEXT://h:0"}, "advertised.listeners", "port 0"),
        ({"inter.broker.listener.name": "OTHER"}, "inter.broker.listener.name", "OTHER"),
        ({"log.dirs": "/a,/a"}, "log.dirs", "listed twice"),
        ({"log.dirs": " , "}, "log.dirs", "no directory"),
        ({"log.segment.bytes": "5"}, "log.segment.bytes", "[14, 2147483647]"),
        ({"log.retention.hours": "soon"}, "log.retention.hours", "not an integer"),
        ({"log.cleanup.policy": "compact,forever"}, "log.cleanup.policy", "one of: compact"),
        ({"replica.fetch.wait.max.ms": "40000"}, "replica.fetch.wait.max.ms", "lag.time"),
        ({"broker.heartbeat.interval.ms": "9000"}, "broker.heartbeat.interval.ms", "session"),
        ({"http.listener": "0.0.0.0:8092"}, "http.bearer.token", "not a loopback"),
        (
            {"controller.quorum.bootstrap.servers": "nowhere"},
            "controller.quorum.bootstrap.servers",
            "host:port",
        ),
    ],
)
def test_bad_values_name_the_property(
    values: dict[str, str], property_name: str, fragment: str
) -> None:
    check_error(values, property_name, fragment)


def test_missing_required_properties() -> None:
    with pytest.raises(BrokerConfigError, match=r"node\.id"):
        BrokerConfig.from_properties({"controller.quorum.bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(BrokerConfigError, match=r"controller\.quorum\.bootstrap\.servers"):
        BrokerConfig.from_properties({"node.id": "1"})
    with pytest.raises(BrokerConfigError, match="id@host:port"):
        BrokerConfig.from_properties({"node.id": "1", "controller.quorum.http.voters": "x"})


def test_a_token_allows_a_non_loopback_http_listener() -> None:
    c = config(**{"http.listener": "0.0.0.0:8092", "http.bearer.token": "s3cret"})
    assert c.http_bearer_token == "s3cret"


# --- listener security (listener.security.protocol.map, listener.name.<l>.*) ---

JAAS_PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_several_listeners_each_with_its_security() -> None:
    c = BrokerConfig.from_properties(
        {
            **BASE,
            "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093,"
            "SSL://127.0.0.1:9094",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS_PLAIN,
            "listener.name.ssl.ssl.keystore.location": "/etc/broker.pem",
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    security = c.listener_security
    assert [
        security[name].security_protocol.name for name in ("PLAINTEXT", "SASL_PLAINTEXT", "SSL")
    ] == [
        "PLAINTEXT",
        "SASL_PLAINTEXT",
        "SSL",
    ]
    sasl = security["SASL_PLAINTEXT"]
    assert sasl.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-512")
    assert set(sasl.plain_users.digests) == {"admin", "alice"}
    assert "admin-secret" not in repr(sasl) and "admin-secret" not in repr(c)
    tls = security["SSL"].tls
    assert tls is not None and tls.client_auth.value == "required"
    assert c.inter_broker_sasl_mechanism is None


def test_sasl_inter_broker_listener_uses_the_brokers_own_credentials() -> None:
    c = BrokerConfig.from_properties(
        {
            **BASE,
            "listeners": "INTERNAL://127.0.0.1:9093",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "INTERNAL",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": JAAS_PLAIN,
        }
    )
    assert c.inter_broker_sasl_mechanism == "PLAIN"
    credentials = c.listener_security["INTERNAL"].client_credentials["PLAIN"]
    assert (credentials.username, credentials.password) == ("admin", "admin-secret")


SASL = "SASL_PLAINTEXT://127.0.0.1:9093"
BAD_JAAS = 'PlainLoginModule required user_a="x"'


@pytest.mark.parametrize(
    ("values", "property_name", "fragment"),
    [
        ({"listeners": SASL}, "sasl.enabled.mechanisms", "GSSAPI"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "PLAIN"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "missing"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": BAD_JAAS},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "ends with ';'"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"},
         "listener.name.sasl_plaintext.plain.sasl.jaas.config", "LoginModule"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "SCRAM-SHA-1"},
         "sasl.enabled.mechanisms", "SCRAM-SHA-1"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "SCRAM-SHA-256",
          "inter.broker.listener.name": "SASL_PLAINTEXT"},
         "sasl.mechanism.inter.broker.protocol", "GSSAPI must be included"),
        ({"listeners": SASL, "sasl.enabled.mechanisms": "SCRAM-SHA-256",
          "inter.broker.listener.name": "SASL_PLAINTEXT",
          "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
         "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config", "username and password"),
        ({"listeners": "X://127.0.0.1:9093", "listener.security.protocol.map": "X:TLS"},
         "listener.security.protocol.map", "maps to TLS"),
        ({"listeners": "SSL://127.0.0.1:9093", "ssl.keystore.location": "/k.pem",
          "listener.name.ssl.ssl.client.auth": "sometimes"},
         "listener.name.ssl.ssl.client.auth", "sometimes"),
    ],
)  # fmt: skip
def test_listener_security_errors_name_the_property(
    values: dict[str, str], property_name: str, fragment: str
) -> None:
    check_error(values, property_name, fragment)


def test_sasl_ssl_honours_only_the_listener_prefixed_client_auth() -> None:
    # KIP-684: broker-wide ssl.client.auth does not apply to SASL_SSL listeners.
    base = {
        **BASE,
        "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9093,SSL://127.0.0.1:9094",
        "ssl.keystore.location": "/etc/broker.pem",
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
    }
    c = BrokerConfig.from_properties(base)
    tls = {name: c.listener_security[name].tls for name in ("SASL_SSL", "SSL")}
    assert [t.client_auth.value for t in tls.values() if t] == ["none", "required"]
    prefixed = BrokerConfig.from_properties(
        {**base, "listener.name.sasl_ssl.ssl.client.auth": "requested"}
    )
    sasl_ssl = prefixed.listener_security["SASL_SSL"].tls
    assert sasl_ssl is not None and sasl_ssl.client_auth.value == "requested"


def test_quota_windows() -> None:
    """quota.window.num (11) and quota.window.size.seconds (1): Kafka's QuotaConfig, atLeast(1)."""
    c = BrokerConfig.from_properties(BASE)
    assert (c.quota_window_num, c.quota_window_size_seconds) == (11, 1)
    c = config(quota_window_num="5", quota_window_size_seconds="2")
    assert (c.quota_window_num, c.quota_window_size_seconds) == (5, 2)
    check_error({"quota.window.num": "0"}, "quota.window.num", "")
    check_error({"quota.window.size.seconds": "0"}, "quota.window.size.seconds", "")


def test_delegation_token_secret_key_and_its_deprecated_name() -> None:
    assert BrokerConfig.from_properties(BASE).delegation_token_secret_key is None
    old = BrokerConfig.from_properties({**BASE, "delegation.token.master.key": "old"})
    assert old.delegation_token_secret_key == "old"
    assert "old" not in repr(old)
    both = {**BASE, "delegation.token.master.key": "old", "delegation.token.secret.key": "new"}
    assert BrokerConfig.from_properties(both).delegation_token_secret_key == "new"
    empty = BrokerConfig.from_properties({**BASE, "delegation.token.secret.key": " "})
    assert empty.delegation_token_secret_key is None
