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


def test_password_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-file\n")
    text = BASE.replace(
        "controller.quorum.password=s3cret", f"controller.quorum.password.file={secret}"
    )
    assert load(text).quorum_password == "from-file"


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
    ],
)
def test_bad_configs_are_named(change: tuple[str, str], message: str) -> None:
    with pytest.raises((ConfigError, ControllerConfigError), match=message):
        load(BASE.replace(*change))
