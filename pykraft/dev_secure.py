"""``pykraft dev --secure``: the same local cluster with TLS, SASL/SCRAM and ACLs on.

Why a mode of ``pykraft dev`` and not a recipe: issue 11 asks that trying a secure cluster cost
one command. PLAINTEXT stays the default, as in Kafka. With ``--secure`` the data directory also
holds ``tls/`` — a throwaway CA (``pykraft/certs.py``) and one PEM key store per node and for the
admin, subjects ``CN=<name>``, mapped to ``User:<name>`` by ``ssl.principal.mapping.rules`` — and:

* controllers: their HTTP API on TLS (``listener.security.protocol.map=CONTROLLER:SSL``) with
  ``ssl.client.auth=requested``: brokers and the admin present certificates; an operator without
  one may send HTTP Basic over the TLS, checked against the SCRAM credentials
  (``quorum/auth_http.py``); a caller with neither is answered 401;
* brokers: an ``INTERNAL`` SSL listener requiring client certificates as the inter-broker
  listener, and the clients' ``SASL_SSL`` listener (SCRAM-SHA-256 and SCRAM-SHA-512) on the
  bootstrap ports; brokers present their certificate to the controllers too;
* everywhere ``authorizer.class.name`` (Kafka's ``StandardAuthorizer``) and ``super.users`` =
  the admin and every broker (``User:broker-<id>``), and on the controllers
  ``pykraft.broker.principal=User:broker-{broker_id}``;
* an ``admin`` user: its password is generated once into ``admin.password`` (mode 0600, like
  ``quorum.password``) and never printed or logged; its SCRAM-SHA-256/512 credentials are written
  through the controllers at every start (``write_admin_credentials``, KIP-554 salted passwords);
* ``client.properties`` (Java clients, and ``pykraft acls/user-scram/topics --command-config``)
  and ``librdkafka.properties`` (confluent-kafka, ``kcat -F``), both 0600 as they hold the admin
  password.

The brokers check SCRAM logins against the metadata image's credentials
(``broker/authorization_scram.py``), so no password is in any node's property file: the admin
can sign in once its credentials are written, before ``pykraft dev`` reports the cluster ready.
"""

from __future__ import annotations

import datetime
import os
import secrets
import ssl
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pykraft.broker.controller_client import ControllerClient
from pykraft.certs import LOCAL_SANS, CertificateAuthority, write_private
from pykraft.metadata.api.security import AlterUserScramCredentialsRequest, upsertion_from_password
from pykraft.metadata.auth.scram import ScramMechanism

ADMIN_USER = "admin"
AUTHORIZER_CLASS_NAME = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
# CN=broker-10,OU=dev,O=pykraft -> User:broker-10 (KIP-371).
MAPPING_RULES = "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"
SCRAM_MECHANISMS = (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
CLIENT_MECHANISM = "SCRAM-SHA-512"
INTER_BROKER_LISTENER = "INTERNAL"
CLIENT_LISTENER = "SASL_SSL"
# Kafka's kafka-configs.sh default for --add-config SCRAM-...=[password=...].
ADMIN_ITERATIONS = 4096
SALT_BYTES = 16
# The throwaway CA outlives a working day of restarts; dev material, not a production PKI.
VALIDITY = datetime.timedelta(days=365)
PASSWORD_BYTES = 24


class DevSecureError(Exception):
    """The admin's credentials could not be written; the message names the controller's error."""


@attrs.frozen
class SecureMaterial:
    """Paths of what ``prepare_material`` wrote in ``<data dir>/tls`` and the data dir."""

    tls_dir: Path
    admin_password: str = attrs.field(repr=False)

    @property
    def ca_path(self) -> Path:
        return self.tls_dir / "ca.pem"

    def key_store(self, name: str) -> Path:
        return self.tls_dir / f"{name}.pem"


def prepare_material(
    data_dir: Path, names: tuple[str, ...], admin_password: str, now: datetime.datetime
) -> SecureMaterial:
    """The CA (kept across runs) and a key store for every name not yet issued."""
    tls_dir = data_dir / "tls"
    tls_dir.mkdir(parents=True, exist_ok=True)
    ca_pem, ca_key = tls_dir / "ca.pem", tls_dir / "ca.key"
    if ca_pem.exists() and ca_key.exists():
        ca = CertificateAuthority.load(ca_pem.read_bytes(), ca_key.read_bytes(), unit="dev")
    else:
        ca = CertificateAuthority.create("pykraft dev CA", now, unit="dev", validity=VALIDITY)
        ca.write(ca_pem, ca_key)
    for name in names:
        path = tls_dir / f"{name}.pem"
        if not path.exists():
            ca.issue(path, name, now, sans=LOCAL_SANS)
    return SecureMaterial(tls_dir, admin_password)


def new_password() -> str:
    return secrets.token_urlsafe(PASSWORD_BYTES)


def super_users(broker_ids: tuple[int, ...]) -> str:
    """Kafka's ``;``-separated ``super.users``: the admin and every broker."""
    return ";".join([f"User:{ADMIN_USER}", *(f"User:broker-{i}" for i in broker_ids)])


def _pem_stores(material: SecureMaterial, name: str) -> dict[str, str]:
    return {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(material.key_store(name)),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(material.ca_path),
        "ssl.principal.mapping.rules": MAPPING_RULES,
    }


def controller_properties(
    material: SecureMaterial, node_id: int, broker_ids: tuple[int, ...]
) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        **_pem_stores(material, f"controller-{node_id}"),
        "ssl.client.auth": "requested",
        "authorizer.class.name": AUTHORIZER_CLASS_NAME,
        "super.users": super_users(broker_ids),
        "pykraft.broker.principal": "User:broker-{broker_id}",
    }


def broker_properties(
    material: SecureMaterial,
    broker_id: int,
    client_port: int,
    inter_broker_port: int,
    broker_ids: tuple[int, ...],
) -> dict[str, str]:
    """Kafka's properties for the two listeners, the controller client's TLS and the
    authorizer (``listener.name.<l>.*`` per KIP-684 for the client-auth of each listener)."""
    internal = INTER_BROKER_LISTENER.lower()
    return {
        "listeners": f"{INTER_BROKER_LISTENER}://127.0.0.1:{inter_broker_port},"
        f"{CLIENT_LISTENER}://127.0.0.1:{client_port}",
        "listener.security.protocol.map": f"{INTER_BROKER_LISTENER}:SSL,"
        f"{CLIENT_LISTENER}:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": INTER_BROKER_LISTENER,
        **_pem_stores(material, f"broker-{broker_id}"),
        f"listener.name.{internal}.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": ",".join(m.mechanism_name for m in SCRAM_MECHANISMS),
        "authorizer.class.name": AUTHORIZER_CLASS_NAME,
        "super.users": super_users(broker_ids),
    }


def client_properties(material: SecureMaterial, bootstrap_servers: str) -> str:
    """Kafka's Java client properties for the admin (also a ``--command-config``)."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{ADMIN_USER}" password="{material.admin_password}";'
    )
    return _lines(
        {
            "bootstrap.servers": bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": CLIENT_MECHANISM,
            "sasl.jaas.config": jaas,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(material.ca_path),
        }
    )


def librdkafka_properties(material: SecureMaterial, bootstrap_servers: str) -> str:
    """librdkafka's names for the same (confluent-kafka, ``kcat -F``)."""
    return _lines(
        {
            "bootstrap.servers": bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": CLIENT_MECHANISM,
            "sasl.username": ADMIN_USER,
            "sasl.password": material.admin_password,
            "ssl.ca.location": str(material.ca_path),
        }
    )


def _lines(values: Mapping[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def write_client_files(material: SecureMaterial, data_dir: Path, bootstrap: str) -> dict[str, Path]:
    files = {
        "client_properties": (data_dir / "client.properties", client_properties),
        "librdkafka_properties": (data_dir / "librdkafka.properties", librdkafka_properties),
    }
    for path, render in files.values():
        write_private(path, render(material, bootstrap))
    return {name: path for name, (path, _) in files.items()}


def admin_credentials_requests(admin_password: str) -> list[AlterUserScramCredentialsRequest]:
    """The admin's SCRAM-SHA-256 and -512 credentials as a Kafka client sends them (KIP-554: the
    salted password, so the password itself never leaves this process); one request per
    mechanism, since the controller refuses a user altered twice in one request
    (``quorum/managers/scram.py``, DUPLICATE_RESOURCE as Kafka's)."""
    return [
        AlterUserScramCredentialsRequest(
            upsertions=(
                upsertion_from_password(
                    ADMIN_USER,
                    mechanism,
                    admin_password,
                    secrets.token_bytes(SALT_BYTES),
                    ADMIN_ITERATIONS,
                ),
            )
        )
        for mechanism in SCRAM_MECHANISMS
    ]


def ensure_secret_file(path: Path, make: Callable[[], object]) -> str:
    """The file's content, written once (mode 0600) with ``make()`` when absent (the quorum
    password and cluster id of every cluster, the admin's password of a secure one)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        path.chmod(0o600)
        return path.read_text(encoding="utf-8").strip()
    value = str(make())
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(value + "\n")
    return value


def admin_ssl_context(material: SecureMaterial) -> ssl.SSLContext:
    """TLS to the controllers as the admin (a super user): its certificate, the cluster's CA."""
    context = ssl.create_default_context(cafile=str(material.ca_path))
    context.load_cert_chain(str(material.key_store(ADMIN_USER)))
    return context


async def write_admin_credentials(
    material: SecureMaterial, controller_urls: Sequence[str], deadline_s: float
) -> None:
    """The admin's SCRAM credentials, written through the controllers with the admin's
    certificate (the admin is a super user; HTTP Basic needs these very credentials)."""
    async with ControllerClient(
        controller_urls, deadline_s=deadline_s, ssl_context=admin_ssl_context(material)
    ) as client:
        for request in admin_credentials_requests(material.admin_password):
            response = await client.alter_user_scram_credentials(request)
            for result in response.results:
                if not result.error.is_success():
                    raise DevSecureError(f"{result.error.name} {result.error.message or ''}")


def prepare(
    data_dir: Path,
    node_names: tuple[str, ...],
    admin_password: str,
    bootstrap_servers: str,
    now: datetime.datetime,
) -> tuple[SecureMaterial, dict[str, Path]]:
    """The material (CA, a key store per node and for the admin) and the client files."""
    material = prepare_material(data_dir, (ADMIN_USER, *node_names), admin_password, now)
    return material, write_client_files(material, data_dir, bootstrap_servers)


def describe(material: SecureMaterial, data_dir: Path, client_files: dict[str, Path]) -> Any:
    """``cluster.json``'s ``security``: how to reach the cluster (paths only: the password
    stays in its 0600 files)."""
    return {
        "security_protocol": "SASL_SSL",
        "sasl_mechanisms": [m.mechanism_name for m in SCRAM_MECHANISMS],
        "admin_user": ADMIN_USER,
        "admin_password_file": str(data_dir / "admin.password"),
        "ssl_ca_location": str(material.ca_path),
        "admin_key_store": str(material.key_store(ADMIN_USER)),
        **{name: str(path) for name, path in client_files.items()},
    }


def startup_text(data_dir: Path, client_files: dict[str, Path]) -> str:
    """What ``pykraft dev --secure`` prints once ready: where the settings are, not the
    password."""
    librdkafka = client_files["librdkafka_properties"]
    return (
        f"security: SASL_SSL with SCRAM-SHA-256/512, ACLs on; user {ADMIN_USER} "
        f"(password in {data_dir / 'admin.password'})\n"
        f"client properties: {client_files['client_properties']} (Java clients; "
        "pykraft topics/acls/user-scram --command-config)\n"
        f"librdkafka properties: {librdkafka} (e.g. kcat -F {librdkafka} -L)"
    )
