"""Real clients against ``pykraft dev --secure`` (1 controller, 2 brokers; issue 11):

* the files ``pykraft dev --secure`` prints are all a client needs: confluent-kafka with the
  client properties' settings and ``kcat -F librdkafka.properties`` produce and consume over
  SASL_SSL with SCRAM-SHA-512 as the admin, on a topic replicated over the brokers' SSL
  inter-broker listener;
* a wrong password is refused with SASL_AUTHENTICATION_FAILED;
* a user created with ``pykraft user-scram`` is described by it, and ``pykraft acls --add``
  grants it DESCRIBE on one topic: ``--list`` shows the ACL, and the controller's doors enforce
  it (over HTTP Basic the user sees that topic only and may not delete it), until
  ``--remove``;
* that user, with WRITE, READ and DESCRIBE on a topic and READ on its group (``pykraft acls``),
  produces and consumes with confluent-kafka and kcat: the brokers read SCRAM logins from the
  metadata image.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from pykraft import cli
from pykraft.properties import Properties
from tests.clients.conftest import DevCluster
from tests.secure_broker import confluent_round_trip

pytestmark = pytest.mark.clients

TIMEOUT_S = 30.0
MESSAGES = 5
ALICE_PASSWORD = "alice-secret"


class SecureCluster(DevCluster):
    def wait_ready(self, timeout_s: float = 150.0) -> None:
        """``pykraft dev`` says running only once every broker is RUNNING and the admin's
        credentials are written; the PLAINTEXT Metadata probe of DevCluster has no listener."""
        deadline = time.monotonic() + timeout_s
        while (info := self.info()).get("state") != "running":
            self._check_alive_before(deadline, f"cluster.json state {info.get('state')!r}")
            time.sleep(0.1)
        self.security: dict[str, str] = info["security"]
        self.admin_urls = list(info["admin_urls"])
        self.brokers = {
            int(b["node_id"]): ("127.0.0.1", int(b["bootstrap_server"].rsplit(":", 1)[1]))
            for b in info["brokers"]
        }

    def pykraft(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
        """``pykraft <argv>`` in this process against the controller; (status, stdout)."""
        capsys.readouterr()
        status = cli.main([argv[0], "--bootstrap-controller", self.admin_urls[0], *argv[1:]])
        return status, capsys.readouterr().out

    def as_admin(self, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
        config = self.security["client_properties"]
        status, out = self.pykraft(capsys, *argv, "--command-config", config)
        assert status == 0, out
        return out

    def librdkafka(self) -> dict[str, str]:
        return dict(Properties.load(Path(self.security["librdkafka_properties"])).values)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    dev = SecureCluster(
        tmp_path_factory.mktemp("secure") / "cluster", controllers=1, brokers=2,
        extra_args=("--secure",),
    )  # fmt: skip
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()


@pytest.fixture(scope="module")
def alice(secure: SecureCluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """User alice (SCRAM-SHA-512, 8192 iterations) made with ``pykraft user-scram``; returns
    a command-config that signs in as alice (HTTP Basic over TLS)."""
    config = tmp_path_factory.mktemp("alice") / "alice.properties"
    config.write_text(
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.username=alice\nsasl.password={ALICE_PASSWORD}\n"
        f"ssl.ca.location={secure.security['ssl_ca_location']}\n"
    )
    return config


def new_topic(secure: SecureCluster, capsys: pytest.CaptureFixture[str], rf: int = 2) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    secure.as_admin(
        capsys, "topics", "--create", "--topic", topic, "--partitions", "1",
        "--replication-factor", str(rf),
    )  # fmt: skip
    return topic


def values() -> list[bytes]:
    return [f"m{i}".encode() for i in range(MESSAGES)]


def kcat(properties: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    executable = shutil.which("kcat")
    assert executable, "kcat is not on PATH: run .ci/install-kcat.sh (Debian package kcat)"
    return subprocess.run(
        [executable, "-F", str(properties), *argv], input=stdin, capture_output=True,
        text=True, timeout=TIMEOUT_S,
    )  # fmt: skip


def kcat_round_trip(properties: Path, topic: str) -> list[str]:
    produced = kcat(properties, "-P", "-t", topic, stdin="one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kcat(properties, "-C", "-t", topic, "-o", "beginning", "-c", "2", "-e")
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.split()


def test_confluent_kafka_with_the_printed_client_settings(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(secure, capsys)  # replicated over the SSL inter-broker listener
    assert secure.librdkafka()["sasl.mechanisms"] == "SCRAM-SHA-512"
    assert confluent_round_trip(secure.librdkafka(), topic, values(), TIMEOUT_S) == values()


def test_kcat_with_the_printed_librdkafka_file(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = new_topic(secure, capsys)
    path = Path(secure.security["librdkafka_properties"])
    assert kcat_round_trip(path, topic) == ["one", "two"]


def test_a_wrong_password_is_refused_with_sasl_authentication_failed(
    secure: SecureCluster,
) -> None:
    errors: list[Any] = []
    config = {**secure.librdkafka(), "sasl.password": "wrong", "error_cb": errors.append}
    producer = Producer(config)
    with pytest.raises(KafkaException):
        producer.list_topics(timeout=5)
    producer.poll(1.0)  # serves error_cb
    # librdkafka's words for the broker's SASL_AUTHENTICATION_FAILED (error 58).
    assert any(
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512" in error.str()
        for error in errors
    ), errors


def test_user_scram_creates_a_user_the_controller_describes(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    out = secure.as_admin(
        capsys, "user-scram", "--alter", "--add-config",
        f"SCRAM-SHA-512=[iterations=8192,password={ALICE_PASSWORD}]",
        "--entity-type", "users", "--entity-name", "alice",
    )  # fmt: skip
    assert out == "Completed updating config for user alice.\n"
    out = secure.as_admin(
        capsys, "user-scram", "--describe", "--entity-type", "users", "--entity-name", "alice"
    )
    assert out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=8192\n"
    )
    assert ALICE_PASSWORD not in out


def test_acls_added_are_listed_and_enforced_by_the_controller(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    test_user_scram_creates_a_user_the_controller_describes(secure, capsys, alice)
    visible, hidden = new_topic(secure, capsys, rf=1), new_topic(secure, capsys, rf=1)
    secure.as_admin(
        capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Describe",
        "--topic", visible,
    )  # fmt: skip
    block = (
        f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={visible}, "
        "patternType=LITERAL)`: \n \t(principal=User:alice, host=*, operation=DESCRIBE, "
        "permissionType=ALLOW) \n"
    )
    assert block in secure.as_admin(capsys, "acls", "--list", "--topic", visible)
    # alice over HTTP Basic: sees the topic she may describe, not the other, may not delete.
    status, out = secure.pykraft(capsys, "topics", "--list", "--command-config", str(alice))
    assert status == 0 and visible in out.split() and hidden not in out.split(), out
    status, out = secure.pykraft(
        capsys, "topics", "--delete", "--topic", visible, "--command-config", str(alice)
    )
    assert status == 1, out
    assert out == (
        "Error while executing topic command : Principal User:alice does not have required "
        f"DELETE on topic '{visible}'.\n"
    )
    assert visible in secure.as_admin(capsys, "topics", "--list").split()
    secure.as_admin(
        capsys, "acls", "--remove", "--force", "--allow-principal", "User:alice",
        "--operation", "Describe", "--topic", visible,
    )  # fmt: skip
    assert secure.as_admin(capsys, "acls", "--list", "--topic", visible) == ""
    status, out = secure.pykraft(capsys, "topics", "--list", "--command-config", str(alice))
    assert status == 0 and visible not in out.split(), out


def grant_alice(secure: SecureCluster, capsys: pytest.CaptureFixture[str], topic: str) -> None:
    secure.as_admin(
        capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Write",
        "--operation", "Read", "--operation", "Describe", "--topic", topic,
    )  # fmt: skip
    secure.as_admin(
        capsys, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
        "--group", f"g-{topic}",
    )  # fmt: skip


def test_confluent_kafka_as_a_user_made_with_user_scram(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str], alice: Path
) -> None:
    test_user_scram_creates_a_user_the_controller_describes(secure, capsys, alice)
    topic = new_topic(secure, capsys)
    grant_alice(secure, capsys, topic)
    config = {
        **secure.librdkafka(),
        "sasl.username": "alice",
        "sasl.password": ALICE_PASSWORD,
        "socket.timeout.ms": 10_000,
    }
    producer = Producer({**config, "error_cb": lambda error: None})
    producer.list_topics(timeout=5)  # raises KafkaException while alice cannot sign in
    assert confluent_round_trip(config, topic, values(), TIMEOUT_S) == values()


def test_kcat_as_a_user_made_with_user_scram(
    secure: SecureCluster, capsys: pytest.CaptureFixture[str], alice: Path, tmp_path: Path
) -> None:
    test_user_scram_creates_a_user_the_controller_describes(secure, capsys, alice)
    topic = new_topic(secure, capsys)
    grant_alice(secure, capsys, topic)
    properties = tmp_path / "alice-librdkafka.properties"
    settings = {**secure.librdkafka(), "sasl.username": "alice", "sasl.password": ALICE_PASSWORD}
    properties.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    listed = kcat(properties, "-L", "-m", "5")
    assert listed.returncode == 0, listed.stderr
    assert kcat_round_trip(properties, topic) == ["one", "two"]
