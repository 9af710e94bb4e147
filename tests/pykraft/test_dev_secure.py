"""``pykraft dev --secure`` without starting anything: ``prepare`` writes the CA, key stores,
property files and client files; brokers and controllers parse those files; every file holding
the admin password is 0600 and nothing else holds it; a second run keeps the CA and password."""

from __future__ import annotations

import datetime
import json
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from pykraft import dev_secure
from pykraft.broker.config import BrokerConfig, controller_tls_settings
from pykraft.controller_cmd import load_controller_config
from pykraft.dev import DevCluster, plan_layout, secured
from pykraft.metadata.auth.principal import parse_mapping_rules, principal_from_certificate, user
from pykraft.properties import Properties

NOW = datetime.datetime(2026, 11, 26, tzinfo=datetime.UTC)
LAYOUT = secured(
    plan_layout(1, 2, 0, free_ports=[19001, 19002, 19003, 19004, 19005, 19006]), [19007, 19008]
)


def prepared(tmp_path: Path) -> DevCluster:
    cluster = DevCluster(LAYOUT, tmp_path)
    cluster.prepare(NOW)
    return cluster


def properties(cluster: DevCluster, name: str) -> dict[str, str]:
    return dict(Properties.load(cluster.data_dir / "config" / f"{name}.properties").values)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_controllers_serve_https_and_authorize(tmp_path: Path) -> None:
    cluster = prepared(tmp_path)
    values = properties(cluster, "controller-1")
    config = load_controller_config(Properties(values))
    assert config.authorizer_enabled
    assert {str(p) for p in config.super_users} == {
        "User:admin",
        "User:broker-10",
        "User:broker-11",
    }
    assert values["listener.security.protocol.map"] == "CONTROLLER:SSL"
    assert values["ssl.client.auth"] == "requested"  # certificates, or Basic over TLS
    assert LAYOUT.admin_url.startswith("https://")


def test_brokers_have_an_ssl_inter_broker_and_a_sasl_ssl_client_listener(tmp_path: Path) -> None:
    cluster = prepared(tmp_path)
    values = properties(cluster, "broker-11")
    config = BrokerConfig.from_properties(values)
    assert config.inter_broker_listener_name == "INTERNAL"
    assert [(e.listener_name, e.port) for e in config.advertised_listeners] == [
        ("INTERNAL", 19008),
        ("SASL_SSL", LAYOUT.brokers[1].port),
    ]
    assert config.listener_security["SASL_SSL"].sasl_mechanisms == (
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    )
    assert values["listener.name.internal.ssl.client.auth"] == "required"
    assert controller_tls_settings(values) is not None  # the broker's certificate for the doors


def test_each_certificate_maps_to_its_principal(tmp_path: Path) -> None:
    cluster = prepared(tmp_path)
    assert cluster.material is not None
    rules = parse_mapping_rules(dev_secure.MAPPING_RULES)
    for name in ("admin", "controller-1", "broker-10", "broker-11"):
        pem = cluster.material.key_store(name).read_bytes()
        certificate = x509.load_pem_x509_certificate(pem[pem.index(b"-----BEGIN CERTIFICATE") :])
        der = certificate.public_bytes(Encoding.DER)
        assert principal_from_certificate(der, rules) == user(name)
        assert mode(cluster.material.key_store(name)) == 0o600


def test_the_admin_password_is_only_in_0600_files(tmp_path: Path) -> None:
    cluster = prepared(tmp_path)
    password = (tmp_path / "admin.password").read_text().strip()
    assert len(password) >= 32
    holders = {p for p in tmp_path.rglob("*") if p.is_file() and password in p.read_text()}
    assert holders == {
        tmp_path / "admin.password",
        tmp_path / "client.properties",
        tmp_path / "librdkafka.properties",
    }
    assert all(mode(path) == 0o600 for path in holders)
    described = json.dumps(cluster.describe("running"))
    assert password not in described
    assert json.loads(described)["security"]["librdkafka_properties"] == str(
        tmp_path / "librdkafka.properties"
    )


def test_client_files_use_kafka_and_librdkafka_names(tmp_path: Path) -> None:
    prepared(tmp_path)
    java = Properties.load(tmp_path / "client.properties").values
    assert java["security.protocol"] == "SASL_SSL"
    assert java["sasl.mechanism"] == "SCRAM-SHA-512"
    assert java["sasl.jaas.config"].startswith(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="admin"'
    )
    assert java["ssl.truststore.location"] == str(tmp_path / "tls" / "ca.pem")
    librdkafka = Properties.load(tmp_path / "librdkafka.properties").values
    assert librdkafka["sasl.username"] == "admin"
    assert librdkafka["ssl.ca.location"] == str(tmp_path / "tls" / "ca.pem")
    assert librdkafka["bootstrap.servers"] == LAYOUT.bootstrap_servers


def test_a_second_run_keeps_the_ca_and_the_password(tmp_path: Path) -> None:
    prepared(tmp_path)
    ca, password = (
        (tmp_path / "tls" / "ca.pem").read_text(),
        (tmp_path / "admin.password").read_text(),
    )
    broker = (tmp_path / "tls" / "broker-10.pem").read_text()
    prepared(tmp_path)
    assert (tmp_path / "tls" / "ca.pem").read_text() == ca
    assert (tmp_path / "admin.password").read_text() == password
    assert (tmp_path / "tls" / "broker-10.pem").read_text() == broker


def test_admin_credentials_are_salted_passwords_one_request_per_mechanism() -> None:
    requests = dev_secure.admin_credentials_requests("s3cret-admin")
    assert [r.upsertions[0].mechanism.mechanism_name for r in requests] == [
        "SCRAM-SHA-256",
        "SCRAM-SHA-512",
    ]
    for request in requests:
        [upsertion] = request.upsertions
        assert upsertion.name == "admin" and upsertion.iterations == 4096
        assert b"s3cret-admin" not in upsertion.salted_password
        assert "s3cret-admin" not in repr(request)


def test_plaintext_stays_the_default(tmp_path: Path) -> None:
    cluster = DevCluster(plan_layout(1, 1, 0, free_ports=[19001, 19002, 19003, 19004]), tmp_path)
    cluster.prepare(NOW)
    assert not (tmp_path / "tls").exists() and not (tmp_path / "admin.password").exists()
    assert properties(cluster, "broker-10")["listeners"].startswith("PLAINTEXT://")
    assert "security" not in cluster.describe("running")
