"""TlsSettings -> SSLContext: handshakes in memory (ssl.MemoryBIO, no sockets) between a server
and a client context built from a throwaway CA (tests/tls_material.py)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from pykraft.metadata.auth.principal import principal_from_certificate, user
from pykraft.metadata.auth.tls_context import client_context, server_context
from pykraft.metadata.auth.tls_settings import TlsSettingsError, parse_tls_settings
from tests.tls_material import TlsMaterial, make_tls_material

# Each handshake step moves one flight; TLS 1.3 needs fewer than this.
MAX_HANDSHAKE_ROUNDS = 10


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> TlsMaterial:
    return make_tls_material(tmp_path_factory.mktemp("tls"), clients=("alice",))


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """Run a handshake in memory; the server's SSLObject (for getpeercert)."""
    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    client_side = client.wrap_bio(to_client, to_server, server_hostname="localhost")
    server_side = server.wrap_bio(server_in, server_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(MAX_HANDSHAKE_ROUNDS):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        server_in.write(to_server.read())
        to_client.write(server_out.read())
        if all(done.values()):
            # The client's last flight (its certificate check result) reaches the server.
            return server_side
    raise AssertionError("handshake did not finish")


def server_settings(material: TlsMaterial, client_auth: str) -> ssl.SSLContext:
    return server_context(
        parse_tls_settings(
            {
                "ssl.keystore.location": str(material.server.path),
                "ssl.truststore.location": str(material.ca_path),
                "ssl.client.auth": client_auth,
            }
        )
    )


def test_mutual_tls_gives_the_certificates_principal(material: TlsMaterial) -> None:
    alice = material.clients["alice"]
    client = client_context(
        parse_tls_settings(
            {
                # KIP-651 inline PEM: the key goes through an in-memory file, trust via cadata.
                "ssl.keystore.certificate.chain": alice.certificate_pem,
                "ssl.keystore.key": alice.key_pem,
                "ssl.truststore.certificates": material.ca_pem,
            }
        )
    )
    server = handshake(server_settings(material, "required"), client)
    rules = parse_tls_settings({}).principal_mapping_rules
    principal = principal_from_certificate(server.getpeercert(binary_form=True), rules)
    assert principal == user("CN=alice,OU=test,O=pykraft")


def test_requested_client_auth_without_certificate_is_anonymous(material: TlsMaterial) -> None:
    client = client_context(parse_tls_settings({"ssl.truststore.location": str(material.ca_path)}))
    server = handshake(server_settings(material, "requested"), client)
    assert server.getpeercert(binary_form=True) is None


def test_required_client_auth_refuses_a_client_without_certificate(
    material: TlsMaterial,
) -> None:
    client = client_context(parse_tls_settings({"ssl.truststore.location": str(material.ca_path)}))
    with pytest.raises(ssl.SSLError):
        server = handshake(server_settings(material, "required"), client)
        server.read(1)  # TLS 1.3: the server sees the missing certificate after its Finished


def test_client_refuses_a_server_its_trust_store_does_not_know(
    material: TlsMaterial, tmp_path: Path
) -> None:
    other = make_tls_material(tmp_path)
    client = client_context(parse_tls_settings({"ssl.truststore.location": str(other.ca_path)}))
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_settings(material, "none"), client)


def test_encrypted_key_with_ssl_key_password(tmp_path: Path) -> None:
    locked = make_tls_material(tmp_path, key_password="s3cret")
    good = {"ssl.keystore.location": str(locked.server.path), "ssl.key.password": "s3cret"}
    server_context(parse_tls_settings(good))
    with pytest.raises(TlsSettingsError) as raised:
        server_context(parse_tls_settings({**good, "ssl.key.password": "wrong-pass"}))
    assert raised.value.property_name == "ssl.keystore.location"
    assert "wrong-pass" not in str(raised.value)


def test_server_without_key_store_names_the_property() -> None:
    with pytest.raises(TlsSettingsError) as raised:
        server_context(parse_tls_settings({}), "listener.name.ssl.")
    assert raised.value.property_name == "listener.name.ssl.ssl.keystore.location"


def test_missing_trust_store_file_names_the_property(tmp_path: Path) -> None:
    settings = parse_tls_settings({"ssl.truststore.location": str(tmp_path / "absent.pem")})
    with pytest.raises(TlsSettingsError) as raised:
        client_context(settings)
    assert raised.value.property_name == "ssl.truststore.location"
