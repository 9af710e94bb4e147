"""Issue 11's first paragraph, replayed against a secure controller: every attack on the HTTP API
is refused with 401/403 and the cluster is the same afterwards (brokers, topics, ISRs).

One controller with its HTTP listener on TLS (``listener.security.protocol.map=CONTROLLER:SSL``,
``ssl.client.auth=requested`` so a caller without a certificate reaches HTTP and is answered
401 rather than cut off in the handshake), ``authorizer.class.name`` set with no ACLs:
``super.users`` are the admin and the brokers, and ``pykraft.broker.principal`` binds broker N to
``User:broker-N``. One real broker (10) talks to it with its client certificate; two stand-in
brokers (20, 21) registered by the test hold the victim partition (leader 20, ISR [20, 21]),
so an AlterPartition shrinking that ISR is one the controller would accept from broker 20.

The attackers: anonymous (no certificate: 401 SASL_AUTHENTICATION_FAILED), ``mallory`` (a valid
certificate of the same CA, no ACL: 403), and broker 21 (a super user, but not broker 10 or
20: 403 for any broker RPC naming another broker). The last checks show the refused requests
were real: the same AlterPartition from broker 20 is accepted, and the first producer-id block
ever handed out starts at 0. An operator without a certificate signs in with HTTP Basic against
the SCRAM credential the admin stored, and is then held to the ACLs — in the web console too,
which asks an anonymous browser to log in (401 + Basic challenge). With
``ssl.client.auth=required`` a caller without a certificate, or without TLS, is cut off in the
handshake and never reaches HTTP.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.metadata.auth.scram import ScramMechanism, salted_password
from pykraft.metadata.records import uuid_to_kafka_string
from tests.integration.conftest import Cluster
from tests.integration.test_broker_process import BrokerProcess
from tests.tls_material import TlsMaterial, make_tls_material

REQUEST_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 30.0
VICTIM = "victim"
IDENTITIES = ("admin", "mallory", "broker-10", "broker-20", "broker-21")
ANONYMOUS = "anonymous"


class Doors:
    """HTTPS calls to the secure controller as one identity or another."""

    def __init__(self, cluster: Cluster, tls: TlsMaterial) -> None:
        self.base = f"https://127.0.0.1:{cluster.controllers[0].http_port}"
        self.contexts: dict[str, ssl.SSLContext] = {}
        for name in (ANONYMOUS, *IDENTITIES):
            context = ssl.create_default_context(cafile=str(tls.ca_path))
            if name != ANONYMOUS:
                context.load_cert_chain(str(tls.clients[name].path))
            self.contexts[name] = context
        self.kept_open: list[http.client.HTTPSConnection] = []

    def call(
        self,
        who: str,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, Any]:
        request = urllib.request.Request(
            self.base + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(
                request, timeout=REQUEST_TIMEOUT_S, context=self.contexts[who]
            ) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def heartbeat_kept_open(self, who: str, body: dict[str, Any]) -> Any:
        """A heartbeat on a connection then left open and idle, as a live broker's is between
        beats: the controller fences a broker one second after its idle heartbeat connection
        closed (quorum/broker_channels.py), and urllib closes its connection after each call."""
        host, port = self.base.removeprefix("https://").split(":")
        connection = http.client.HTTPSConnection(
            host, int(port), timeout=REQUEST_TIMEOUT_S, context=self.contexts[who]
        )
        self.kept_open.append(connection)
        connection.request(
            "POST", "/v1/brokers/heartbeat", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200, (response.status, answer)
        return answer

    def close(self) -> None:
        for connection in self.kept_open:
            connection.close()

    def ok(self, who: str, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(who, method, path, body)
        assert status < 300, (status, answer)
        return answer

    def state(self) -> Any:
        """What must not change: the brokers, the topics and every partition's ISR."""
        topics = self.ok("admin", "GET", "/v1/topics")["topics"]
        return (
            self.ok("admin", "GET", "/v1/brokers"),
            topics,
            [self.ok("admin", "GET", f"/v1/topics/{t['name']}")["partitions"] for t in topics],
        )


def console_page(
    doors: Doors, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], str]:
    """A web console page as a browser without a client certificate gets it."""
    request = urllib.request.Request(doors.base + path, headers=headers or {})
    try:
        with urllib.request.urlopen(
            request, timeout=REQUEST_TIMEOUT_S, context=doors.contexts[ANONYMOUS]
        ) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def wait_until(predicate: Any, what: str, timeout_s: float = READY_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def controller_properties(tls: TlsMaterial, client_auth: str) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(tls.server.path),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.ca_path),
        "ssl.client.auth": client_auth,
        # CN=broker-10,OU=test,O=pykraft -> User:broker-10
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:broker-10;User:broker-20;User:broker-21",
        "pykraft.broker.principal": "User:broker-{broker_id}",
        "cluster.id": "doors-test-cluster",
    }


def broker_properties(tls: TlsMaterial) -> dict[str, str]:
    """Kafka's properties for the controller listener, as the broker reads them."""
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "listener.name.controller.ssl.keystore.type": "PEM",
        "listener.name.controller.ssl.keystore.location": str(tls.clients["broker-10"].path),
        "listener.name.controller.ssl.truststore.location": str(tls.ca_path),
    }


def register_stand_in(doors: Doors, broker_id: int) -> int:
    """Register broker ``broker_id`` with its own certificate and heartbeat it unfenced."""
    who = f"broker-{broker_id}"
    epoch = doors.ok(who, "POST", "/v1/brokers/register", registration(broker_id, 6000))[
        "broker_epoch"
    ]

    def unfenced() -> bool:
        return not doors.heartbeat_kept_open(who, heartbeat(broker_id, epoch))["is_fenced"]

    wait_until(unfenced, f"stand-in broker {broker_id} unfenced")
    return int(epoch)


def registration(broker_id: int, port: int) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "incarnation_id": uuid_to_kafka_string(os.urandom(16)),
        "endpoints": [
            {"name": "PLAINTEXT", "host": "127.0.0.1", "port": port, "security_protocol": 0}
        ],
    }


def heartbeat(broker_id: int, epoch: int, *, want_shut_down: bool = False) -> dict[str, Any]:
    return {
        "broker_id": broker_id,
        "broker_epoch": epoch,
        "current_metadata_offset": 2**62,
        "want_shut_down": want_shut_down,
    }


def start_secure_controller(
    cluster_factory: Any, tmp_path: Path, client_auth: str
) -> tuple[Doors, Cluster, TlsMaterial]:
    tls = make_tls_material(tmp_path, clients=IDENTITIES)
    cluster: Cluster = cluster_factory(size=1, extra=controller_properties(tls, client_auth))
    doors = Doors(cluster, tls)
    controller = cluster.controllers[0]

    def leading() -> bool:
        assert controller.alive(), controller.log_tail()
        status, answer = doors.call("admin", "GET", "/v1/quorum")
        return status == 200 and answer["state"] == "leader"

    wait_until(leading, "the secure controller to lead")
    return doors, cluster, tls


@pytest.fixture
def secure(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path
) -> Iterator[tuple[Doors, BrokerProcess]]:
    doors, cluster, tls = start_secure_controller(cluster_factory, tmp_path, "requested")
    controller = cluster.controllers[0]
    broker = BrokerProcess(tmp_path, 10, f"127.0.0.1:{controller.http_port}")
    with broker.config_path.open("a") as config:
        config.writelines(f"{k}={v}\n" for k, v in broker_properties(tls).items())
    brokers.append(broker)
    broker.start()
    broker.wait_running()
    yield doors, broker
    doors.close()


def test_every_attack_on_the_controller_is_refused_and_changes_nothing(
    secure: tuple[Doors, BrokerProcess],
) -> None:
    doors, broker = secure
    epochs = {broker_id: register_stand_in(doors, broker_id) for broker_id in (20, 21)}
    doors.ok("admin", "POST", "/v1/topics", {"name": VICTIM, "assignments": {"0": [20, 21]}})
    (partition,) = doors.ok("admin", "GET", f"/v1/topics/{VICTIM}")["partitions"]
    assert (partition["leader"], partition["isr"]) == (20, [20, 21])
    topic_id = doors.ok("admin", "GET", f"/v1/topics/{VICTIM}")["topic_id"]
    brokers = {b["broker_id"]: b for b in doors.ok("admin", "GET", "/v1/brokers")["brokers"]}
    assert brokers[10]["fenced"] is False  # the real broker registered over mutual TLS
    epochs[10] = brokers[10]["broker_epoch"]
    before = doors.state()

    shrink_isr = {
        "broker_id": 20,
        "broker_epoch": epochs[20],
        "partitions": [
            {
                "topic_id": topic_id,
                "partition_index": 0,
                "leader_epoch": partition["leader_epoch"],
                "partition_epoch": partition["partition_epoch"],
                "new_isr": [20],
                "leader_recovery_state": 0,
            }
        ],
    }
    attacks: list[tuple[str, str, Any, str, str | None]] = [
        # (method, path, body, mallory's error, broker 21's error or None when not a broker RPC)
        ("DELETE", f"/v1/topics/{VICTIM}", None, "TOPIC_AUTHORIZATION_FAILED", None),
        (
            "POST",
            "/v1/brokers/register",
            registration(7, 6666),
            "CLUSTER_AUTHORIZATION_FAILED",
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (
            "POST",
            "/v1/brokers/heartbeat",
            heartbeat(7, 1),
            "CLUSTER_AUTHORIZATION_FAILED",
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (
            "POST",
            "/v1/brokers/heartbeat",
            heartbeat(10, epochs[10], want_shut_down=True),
            "CLUSTER_AUTHORIZATION_FAILED",
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        ("DELETE", "/v1/brokers/10", None, "CLUSTER_AUTHORIZATION_FAILED", None),
        (
            "POST",
            "/v1/alter-partition",
            shrink_isr,
            "CLUSTER_AUTHORIZATION_FAILED",
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (
            "POST",
            "/v1/producer-ids",
            {"broker_id": 10, "broker_epoch": epochs[10]},
            "CLUSTER_AUTHORIZATION_FAILED",
            "CLUSTER_AUTHORIZATION_FAILED",
        ),
        (
            "POST",
            "/v1/topics",
            {"name": "__consumer_offsets", "partitions": 1, "replication_factor": 1},
            "TOPIC_AUTHORIZATION_FAILED",
            None,
        ),
        ("GET", "/v1/metadata/records", None, "CLUSTER_AUTHORIZATION_FAILED", None),
    ]
    for method, path, body, mallory_error, broker_error in attacks:
        status, answer = doors.call(ANONYMOUS, method, path, body)
        assert (status, answer["error"]) == (401, "SASL_AUTHENTICATION_FAILED"), (path, answer)
        status, answer = doors.call("mallory", method, path, body)
        assert (status, answer["error"]) == (403, mallory_error), (path, answer)
        assert "User:mallory" in answer["message"]
        if broker_error is not None:
            status, answer = doors.call("broker-21", method, path, body)
            assert (status, answer["error"]) == (403, broker_error), (path, answer)
            assert "pykraft.broker.principal" in answer["message"]

    # A password without a SCRAM credential behind it is no identity either.
    status, answer = doors.call(
        ANONYMOUS,
        "DELETE",
        f"/v1/topics/{VICTIM}",
        headers={"Authorization": "Basic YWRtaW46bm90LWEtcGFzc3dvcmQ="},  # admin:not-a-password
    )
    assert (status, answer["error"]) == (401, "SASL_AUTHENTICATION_FAILED")
    assert "not-a-password" not in json.dumps(answer)
    # Mallory sees no topic she may not describe (Kafka's Metadata hides them too).
    assert doors.ok("mallory", "GET", "/v1/topics")["topics"] == []

    assert doors.state() == before
    broker_status = broker.status()
    assert broker_status is not None, broker.log_tail()
    assert broker_status["state"] == "RUNNING", broker.log_tail()

    # The refused requests were real: from broker 20 itself the same shrink is accepted, and no
    # producer-id block was handed out before this first one.
    (result,) = doors.ok("broker-20", "POST", "/v1/alter-partition", shrink_isr)["partitions"]
    assert (result["error"], result["isr"]) == ("NONE", [20])
    block = doors.ok(
        "broker-20", "POST", "/v1/producer-ids", {"broker_id": 20, "broker_epoch": epochs[20]}
    )
    assert block["producer_id_start"] == 0


def test_an_operator_signs_in_with_a_scram_password_and_is_held_to_the_acls(
    secure: tuple[Doors, BrokerProcess],
) -> None:
    doors, _ = secure
    doors.ok("admin", "POST", "/v1/topics", {"name": VICTIM, "partitions": 1})
    doors.ok("admin", "POST", "/v1/topics", {"name": "other", "partitions": 1})
    salt = os.urandom(16)
    salted = salted_password(ScramMechanism.SCRAM_SHA_512, "operator-secret", salt, 4096)
    upsertion = {
        "name": "operator",
        "mechanism": "SCRAM-SHA-512",
        "iterations": 4096,
        "salt": base64.b64encode(salt).decode(),
        "salted_password": base64.b64encode(salted).decode(),
    }
    (result,) = doors.ok("admin", "POST", "/v1/scram-credentials", {"upsertions": [upsertion]})[
        "results"
    ]
    assert result["error"] == "NONE"
    describe_victim = {
        "resource_type": "TOPIC",
        "resource_name": VICTIM,
        "pattern_type": "LITERAL",
        "principal": "User:operator",
        "host": "*",
        "operation": "DESCRIBE",
        "permission_type": "ALLOW",
    }
    doors.ok("admin", "POST", "/v1/acls", {"creations": [describe_victim]})

    def basic(password: str) -> dict[str, str]:
        token = base64.b64encode(f"operator:{password}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    # Authenticated by the password, authorized by the ACLs: it sees the one topic it may
    # describe, and may not delete it.
    status, answer = doors.call(ANONYMOUS, "GET", "/v1/topics", headers=basic("operator-secret"))
    assert status == 200, answer
    assert [t["name"] for t in answer["topics"]] == [VICTIM]
    status, answer = doors.call(
        ANONYMOUS, "DELETE", f"/v1/topics/{VICTIM}", headers=basic("operator-secret")
    )
    assert (status, answer["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert "User:operator" in answer["message"]
    status, answer = doors.call(ANONYMOUS, "GET", "/v1/topics", headers=basic("operator-secreT"))
    assert (status, answer["error"]) == (401, "SASL_AUTHENTICATION_FAILED")
    assert "operator-secre" not in json.dumps(answer)
    # The web console (issue 16) behind the same doors: a browser without credentials is asked
    # for them; the operator's topic list shows only the topic it may describe, and the
    # cluster's pages need DESCRIBE on the cluster, which it was not granted.
    status, headers, _ = console_page(doors, "/console/topics")
    assert (status, headers.get("WWW-Authenticate")) == (401, 'Basic realm="pykraft"')
    status, _, page = console_page(doors, "/console/topics", basic("operator-secret"))
    assert status == 200 and f">{VICTIM}</a>" in page and ">other</a>" not in page
    assert console_page(doors, "/console", basic("operator-secret"))[0] == 403
    topics = doors.ok("admin", "GET", "/v1/topics")["topics"]
    assert sorted(t["name"] for t in topics) == ["other", VICTIM]


def test_with_client_auth_required_no_certificate_gets_past_the_handshake(
    cluster_factory: Any, tmp_path: Path
) -> None:
    doors, cluster, _ = start_secure_controller(cluster_factory, tmp_path, "required")
    # Without a certificate (or without TLS at all) there is no HTTP answer, only a closed
    # connection: ssl.client.auth=required refuses in the handshake, before any byte of HTTP.
    with pytest.raises(OSError):
        doors.call(ANONYMOUS, "DELETE", f"/v1/topics/{VICTIM}")
    plain = doors.base.replace("https://", "http://") + "/v1/topics"
    with pytest.raises(OSError):
        urllib.request.urlopen(plain, timeout=REQUEST_TIMEOUT_S)
    # A certificate is an identity; without an ACL it is still refused (403, not 401).
    status, answer = doors.call("mallory", "POST", "/v1/topics", {"name": "mine"})
    assert (status, answer["error"]) == (403, "TOPIC_AUTHORIZATION_FAILED")
    assert doors.ok("admin", "GET", "/v1/topics")["topics"] == []
    assert cluster.controllers[0].alive(), cluster.controllers[0].log_tail()
