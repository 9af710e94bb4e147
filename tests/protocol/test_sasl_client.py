"""The inter-broker SASL client against the broker's own SASL servers (both pure)."""

from __future__ import annotations

import pytest

from pykraft.broker.sasl_mechanisms import (
    SCRAM_MIN_ITERATIONS,
    PlainServer,
    PlainUsers,
    SaslServer,
    ScramServer,
    StaticScramCredentials,
)
from pykraft.metadata.auth.scram import ScramMechanism, credential_from_password
from pykraft.protocol.sasl_client import SaslClient, SaslClientCredentials, SaslClientError

SALT = b"0123456789abcdef"


def run(client: SaslClient, server: SaslServer) -> str:
    """Exchange tokens as SaslAuthenticate would; the authorization id the server proved."""
    token = client.next_token(None)
    while token is not None:
        challenge = server.evaluate_response(token)
        token = client.next_token(challenge)
    assert client.complete and server.complete
    return server.authorization_id


def test_plain() -> None:
    client = SaslClient(SaslClientCredentials("PLAIN", "broker", "pw"), "n")
    assert run(client, PlainServer(PlainUsers.from_passwords({"broker": "pw"}))) == "broker"


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram(mechanism: str) -> None:
    source = StaticScramCredentials(
        {
            ("broker", mechanism): credential_from_password(
                ScramMechanism.from_mechanism_name(mechanism), "pw", SALT, SCRAM_MIN_ITERATIONS
            )
        }
    )
    client = SaslClient(SaslClientCredentials(mechanism, "broker", "pw"), "clientnonce")
    assert run(client, ScramServer(mechanism, source, "servernonce")) == "broker"


def test_scram_refuses_a_server_that_does_not_know_the_password() -> None:
    mechanism = "SCRAM-SHA-512"
    client = SaslClient(SaslClientCredentials(mechanism, "broker", "pw"), "clientnonce")
    client.next_token(None)
    # A forged server-final: right shape, wrong signature.
    client.next_token(b"r=clientnoncesrv,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=4096")
    with pytest.raises(SaslClientError):
        client.next_token(b"v=AAAA")


def test_credentials_hide_the_password() -> None:
    assert "pw" not in repr(SaslClientCredentials("PLAIN", "broker", "pw"))
