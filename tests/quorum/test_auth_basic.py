"""HTTP Basic checked against SCRAM credentials (quorum/auth_basic.py).

The credentials are made by scramp (``credential_from_password``, what the cluster stores), so
the check agrees with a real SCRAM server's StoredKey (RFC 5802 §3).
"""

from __future__ import annotations

import base64
import os

import attrs
import pytest

from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism, credential_from_password
from pykraft.quorum.auth_basic import (
    MAX_BASIC_HEADER_CHARS,
    BasicCredentials,
    parse_basic,
    verify,
)


@attrs.frozen
class Store:
    credentials: dict[tuple[str, ScramMechanism], ScramCredential]

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))


def credential(mechanism: str, password: str, iterations: int = 4096) -> ScramCredential:
    # scramp's make_auth_info, as AlterUserScramCredentials stores it.
    return credential_from_password(
        ScramMechanism.from_mechanism_name(mechanism), password, os.urandom(16), iterations
    )


def key(mechanism: str) -> ScramMechanism:
    return ScramMechanism.from_mechanism_name(mechanism)


def header(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_right_password_matches_the_stored_key(mechanism: str) -> None:
    store = Store({("alice", key(mechanism)): credential(mechanism, "alice-secret")})
    assert verify(store, BasicCredentials("alice", "alice-secret"))
    assert not verify(store, BasicCredentials("alice", "alice-secret!"))
    assert not verify(store, BasicCredentials("bob", "alice-secret"))


def test_either_mechanism_may_hold_the_password() -> None:
    store = Store(
        {
            ("alice", key("SCRAM-SHA-512")): credential("SCRAM-SHA-512", "old"),
            ("alice", key("SCRAM-SHA-256")): credential("SCRAM-SHA-256", "new"),
        }
    )
    assert verify(store, BasicCredentials("alice", "new"))
    assert verify(store, BasicCredentials("alice", "old"))
    assert not verify(store, BasicCredentials("alice", "other"))


def test_parse_basic() -> None:
    assert parse_basic(header("alice:pa:ss")) == BasicCredentials("alice", "pa:ss")
    assert parse_basic(None) is None
    assert parse_basic("Bearer abc") is None
    assert parse_basic("Basic not-base64!") is None
    assert parse_basic(header("no-colon")) is None
    assert parse_basic(header(":password")) is None
    assert parse_basic(header("alice:")) is None
    assert parse_basic("Basic " + "A" * MAX_BASIC_HEADER_CHARS) is None


def test_the_password_is_never_in_a_repr() -> None:
    assert "s3cret" not in repr(BasicCredentials("alice", "s3cret"))
    stored = credential("SCRAM-SHA-256", "s3cret")
    assert stored.stored_key.hex() not in repr(stored)
