"""Controller configuration from a .properties file (pykraft/controller_cmd.py)."""

from pathlib import Path

import pytest

from pykraft.controller_cmd import load_controller_config
from pykraft.properties import ConfigError, Properties
from pykraft.quorum.config import ControllerConfigError, HostPort

BASE = """
node.id=2
controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095
controller.quorum.http.voters=1@127.0.0.1:19093,2@127.0.0.1:19094,3@127.0.0.1:19095
listeners=CONTROLLER://127.0.0.1:19094
metadata.log.dir=/tmp/c2
controller.quorum.password=s3cret
"""


def load(text: str):
    return load_controller_config(Properties.parse(text, source="c.properties"))


def test_kafka_property_names_and_defaults() -> None:
    config = load(BASE)
    assert config.node_id == 2
    assert config.self_raft_address == HostPort(host="127.0.0.1", port=9094)
    assert config.http_listener.url == "http://127.0.0.1:19094"
    assert config.http_url(3) == "http://127.0.0.1:19095"
    assert config.metadata_log_dir == Path("/tmp/c2")
    assert config.node_id_for_raft_address("127.0.0.1:9095") == 3
    assert (
        config.election_timeout_ms,
        config.broker_session_timeout_ms,
        config.metadata_max_idle_interval_ms,
    ) == (1000, 9000, 500)


def test_leader_balancing_properties_and_kafkas_defaults() -> None:
    config = load(BASE)
    assert (
        config.auto_leader_rebalance_enable,
        config.leader_imbalance_check_interval_seconds,
        config.leader_imbalance_per_broker_percentage,
    ) == (True, 300, 10)
    config = load(
        BASE
        + "auto.leader.rebalance.enable=false\n"
        + "leader.imbalance.check.interval.seconds=2\n"
        + "leader.imbalance.per.broker.percentage=20\n"
    )
    assert (
        config.auto_leader_rebalance_enable,
        config.leader_imbalance_check_interval_seconds,
        config.leader_imbalance_per_broker_percentage,
    ) == (False, 2, 20)


def test_the_journal_is_fsynced_unless_turned_off() -> None:
    config = load(BASE)
    assert (config.fsync, config.durable_images) == (True, False)
    config = load(BASE + "controller.quorum.fsync=false\npykraft.quorum.durable.images=true\n")
    assert (config.fsync, config.durable_images) == (False, True)


def test_password_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    text = BASE.replace(
        "controller.quorum.password=s3cret", f"controller.quorum.password.file={secret}"
    )
    assert load(text).quorum_password == "from-file"


def test_delegation_token_properties_and_kafkas_defaults() -> None:
    config = load(BASE)
    assert config.delegation_token_secret_key is None
    assert (
        config.delegation_token_max_lifetime_ms,
        config.delegation_token_expiry_time_ms,
        config.delegation_token_expiry_check_interval_ms,
    ) == (604_800_000, 86_400_000, 3_600_000)
    config = load(
        BASE
        + "delegation.token.master.key=old\n"
        + "delegation.token.max.lifetime.ms=1000\n"
        + "delegation.token.expiry.time.ms=500\n"
        + "delegation.token.expiry.check.interval.ms=100\n"
    )
    assert config.delegation_token_secret_key == "old"  # the deprecated name still works
    assert "old" not in repr(config)
    assert (
        config.delegation_token_max_lifetime_ms,
        config.delegation_token_expiry_time_ms,
        config.delegation_token_expiry_check_interval_ms,
    ) == (1000, 500, 100)
    both = load(BASE + "delegation.token.master.key=old\ndelegation.token.secret.key=new\n")
    assert both.delegation_token_secret_key == "new"
    assert load(BASE + "delegation.token.secret.key=\n").delegation_token_secret_key is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("controller.quorum.password=s3cret", ""), "password"),
        (
            ("controller.quorum.password=s3cret", "controller.quorum.password.file=/nonexistent"),
            "nonexistent",
        ),
        (("node.id=2", "node.id=7"), "not one of controller.quorum.voters"),
        (("1@127.0.0.1:9093", "1@127.0.0.1"), "expected host:port"),
        (("1@127.0.0.1:9093", "x@127.0.0.1:9093"), "expected id@host:port"),
        (("CONTROLLER://", "PLAINTEXT://"), "no listener named CONTROLLER"),
        (("node.id=2", "node.id=two"), "not an integer"),
        (
            ("node.id=2", "node.id=2\nleader.imbalance.check.interval.seconds=0"),
            "leader.imbalance.check.interval.seconds must be at least 1",
        ),
    ],
)
def test_bad_configs_are_named(change: tuple[str, str], message: str) -> None:
    with pytest.raises((ConfigError, ControllerConfigError), match=message):
        load(BASE.replace(*change))


def test_plaintext_without_an_authorizer_stays_the_default() -> None:
    config = load(BASE)
    assert config.http_tls is None
    assert config.http_scheme == "http"
    assert (config.authorizer_enabled, config.super_users, config.broker_principal) == (
        False,
        frozenset(),
        None,
    )
    assert config.allow_everyone_if_no_acl_found is False
    assert config.cluster_id is None


SECURE = (
    BASE
    + """
listener.security.protocol.map=CONTROLLER:SSL,PLAINTEXT:PLAINTEXT
listener.name.controller.ssl.keystore.location=/etc/pykraft/c2.pem
ssl.truststore.location=/etc/pykraft/ca.pem
ssl.client.auth=required
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin; User:CN=broker-1,OU=test
allow.everyone.if.no.acl.found=true
pykraft.broker.principal=User:CN=broker-{broker_id},OU=test
cluster.id=MkU3OEVBNTcwNTJENDM2Qk
"""
)


def test_a_secure_controller_listener() -> None:
    config = load(SECURE)
    assert config.http_tls is not None
    assert config.http_tls.keystore is not None
    assert config.http_tls.keystore.location == "/etc/pykraft/c2.pem"
    assert config.http_tls.client_auth.value == "required"
    assert config.http_url(3) == "https://127.0.0.1:19095"
    assert config.authorizer_enabled
    assert {str(p) for p in config.super_users} == {"User:admin", "User:CN=broker-1,OU=test"}
    assert config.allow_everyone_if_no_acl_found
    assert config.broker_principal == "User:CN=broker-{broker_id},OU=test"
    assert config.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("CONTROLLER:SSL", "CONTROLLER:TLS"), "expected NAME:PROTOCOL"),
        (("CONTROLLER:SSL", "CONTROLLER:SASL_SSL"), "PLAINTEXT or SSL"),
        (("ssl.client.auth=required", "ssl.client.auth=sometimes"), "ssl.client.auth"),
        (("super.users=User:admin;", "super.users=admin;"), "super.users"),
        (("broker-{broker_id},OU=test", "broker,OU=test"), "pykraft.broker.principal"),
    ],
)
def test_bad_security_properties_are_refused(change: tuple[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(SECURE.replace(*change))


def test_an_observer_is_configured_with_bootstrap_servers_and_a_raft_listener(
    tmp_path: Path,
) -> None:
    """KIP-853: ``controller.quorum.bootstrap.servers`` instead of ``controller.quorum.voters``;
    the controller's own Raft address is the ``RAFT://`` listener."""
    password = tmp_path / "password"
    password.write_text("secret")
    password.chmod(0o600)
    props = Properties.parse(
        "node.id=4\nprocess.roles=controller\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093, 127.0.0.1:9094\n"
        "listeners=CONTROLLER://127.0.0.1:19096,RAFT://127.0.0.1:9096\n"
        f"metadata.log.dir={tmp_path}\ncontroller.quorum.password.file={password}\n",
        "observer.properties",
    )
    config = load_controller_config(props)
    assert config.voters == {}
    assert [str(a) for a in config.bootstrap_servers] == ["127.0.0.1:9093", "127.0.0.1:9094"]
    assert str(config.self_raft_address) == "127.0.0.1:9096"
    assert str(config.http_listener) == "127.0.0.1:19096"


def dynamic_properties(tmp_path: Path, extra: str = "") -> Properties:
    password = tmp_path / "password"
    password.write_text("secret")
    password.chmod(0o600)
    return Properties.parse(
        "node.id=1\nprocess.roles=controller\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093,127.0.0.1:9094\n"
        "listeners=CONTROLLER://127.0.0.1:19093,RAFT://127.0.0.1:9093\n"
        f"metadata.log.dir={tmp_path}\ncontroller.quorum.password.file={password}\n" + extra,
        "dynamic.properties",
    )


def test_static_voters_are_kraft_version_0_and_bootstrap_servers_kraft_version_1(
    tmp_path: Path,
) -> None:
    """Kafka 3.9: controller.quorum.voters is kraft.version 0 (no voter changes); a quorum
    formatted with --standalone / --initial-controllers and found through
    controller.quorum.bootstrap.servers is kraft.version 1."""
    assert load(BASE).kraft_version == 0
    config = load_controller_config(
        dynamic_properties(
            tmp_path, "pykraft.quorum.initial.controllers=1@127.0.0.1:9093,2@127.0.0.1:9094\n"
        )
    )
    assert config.kraft_version == 1
    assert {n: str(a) for n, a in config.initial_controllers.items()} == {
        1: "127.0.0.1:9093",
        2: "127.0.0.1:9094",
    }
    assert load_controller_config(dynamic_properties(tmp_path)).initial_controllers == {}


def test_initial_controllers_are_refused_with_static_voters_or_another_raft_address(
    tmp_path: Path,
) -> None:
    with pytest.raises(ControllerConfigError, match="initial-controllers cannot be used"):
        load(BASE + "pykraft.quorum.initial.controllers=1@127.0.0.1:9093\n")
    with pytest.raises(ControllerConfigError, match=r"initial\.controllers entry"):
        load_controller_config(
            dynamic_properties(tmp_path, "pykraft.quorum.initial.controllers=1@127.0.0.1:9999\n")
        )
