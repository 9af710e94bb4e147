"""HTTP Basic checked against SCRAM credentials (quorum/auth_basic.py).

The credentials are made by scramp (the SCRAM implementation Kafka clients are tested against
here), so the check agrees with a real SCRAM server's StoredKey (RFC 5802 §3).
"""

from __future__ import annotations

import base64

import attrs
import pytest
import scramp  # type: ignore[import-untyped]

from pykraft.quorum.auth_basic import (
    MAX_BASIC_HEADER_CHARS,
    BasicCredentials,
    ScramCredential,
    parse_basic,
    verify,
)


@attrs.frozen
class Store:
    credentials: dict[tuple[str, str], ScramCredential]

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get((user, mechanism))


def credential(mechanism: str, password: str, iterations: int = 4096) -> ScramCredential:
    salt, stored_key, _server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations
    )
    return ScramCredential(salt=salt, iterations=count, stored_key=stored_key)


def header(text: str) -> str:
    return "Basic " + base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_right_password_matches_the_stored_key(mechanism: str) -> None:
    store = Store({("alice", mechanism): credential(mechanism, "alice-secret")})
    assert verify(store, BasicCredentials("alice", "alice-secret"))
    assert not verify(store, BasicCredentials("alice", "alice-secret!"))
    assert not verify(store, BasicCredentials("bob", "alice-secret"))


def test_either_mechanism_may_hold_the_password() -> None:
    store = Store(
        {
            ("alice", "SCRAM-SHA-512"): credential("SCRAM-SHA-512", "old"),
            ("alice", "SCRAM-SHA-256"): credential("SCRAM-SHA-256", "new"),
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
