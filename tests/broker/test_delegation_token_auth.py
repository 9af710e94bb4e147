"""SCRAM logins with a delegation token (KIP-48): the client-first message carries the
``tokenauth=true`` extension, the user name is the token id and the password the base64 of the
token's HMAC; the login proves the token's owner. Mirrors Kafka's ``ScramSaslServerTest``
(``validateTokenAuthentication``, ``noAuthorizationIdSpecified`` with tokens) and
``DelegationTokenEndToEndAuthorizationTest`` (a token login acts as its owner and may not
create tokens)."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from pykraft.broker.authorization_scram import ImageScramCredentials
from pykraft.broker.sasl_mechanisms import SCRAM_SHA_256, SCRAM_SHA_512, SaslError, ScramServer
from pykraft.metadata.auth.principal import KafkaPrincipal
from pykraft.metadata.delegation_tokens import token_hmac
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import DelegationTokenRecord

SECRET = "token-secret"
TOKEN_ID = "tok-1"
HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}


def image_with_token(owner: str = "User:alice") -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    delta.replay(
        DelegationTokenRecord(
            owner=owner,
            requester=owner,
            renewers=(),
            issue_timestamp=0,
            max_timestamp=10,
            expiration_timestamp=5,
            token_id=TOKEN_ID,
        )
    )
    return delta.apply(offset=0, epoch=1)


def login(server: ScramServer, mechanism: str, user: str, password: str, extensions: str) -> bytes:
    """An RFC 5802 client, written out: scramp's client cannot send extensions."""
    digest = HASHES[mechanism]
    client_nonce = "clientnonce"
    bare = f"n={user},r={client_nonce}{extensions}"
    server_first = server.evaluate_response(f"n,,{bare}".encode()).decode()
    attributes = dict(item.split("=", 1) for item in server_first.split(","))
    salt = base64.b64decode(attributes["s"])
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, int(attributes["i"]))
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored_key = hashlib.new(digest, client_key).digest()
    without_proof = f"c=biws,r={attributes['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored_key, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    return server.evaluate_response(final.encode())


def password(secret: str = SECRET) -> str:
    return base64.b64encode(token_hmac(TOKEN_ID, secret)).decode()


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_a_token_login_proves_the_tokens_owner(mechanism: str) -> None:
    source = ImageScramCredentials(image_with_token, SECRET)
    server = ScramServer(mechanism, source, nonce="servernonce")
    assert login(server, mechanism, TOKEN_ID, password(), ",tokenauth=true").startswith(b"v=")
    assert server.complete
    assert server.principal == KafkaPrincipal("User", "alice")
    assert server.principal.token_authenticated


def test_the_extension_is_case_insensitive_and_other_extensions_are_kept() -> None:
    source = ImageScramCredentials(image_with_token, SECRET)
    server = ScramServer(SCRAM_SHA_256, source, nonce="servernonce")
    login(server, SCRAM_SHA_256, TOKEN_ID, password(), ",tokenauth=TRUE,traceid=7")
    assert server.principal.token_authenticated


@pytest.mark.parametrize(
    ("user", "secret", "extensions"),
    [
        (TOKEN_ID, "other-secret", ",tokenauth=true"),  # a wrong HMAC
        ("tok-unknown", SECRET, ",tokenauth=true"),  # no such token
        (TOKEN_ID, SECRET, ""),  # the token id is no SCRAM user
        (TOKEN_ID, SECRET, ",tokenauth=false"),
    ],
)
def test_a_failed_token_login(user: str, secret: str, extensions: str) -> None:
    source = ImageScramCredentials(image_with_token, SECRET)
    server = ScramServer(SCRAM_SHA_256, source, nonce="servernonce")
    with pytest.raises(SaslError):
        login(server, SCRAM_SHA_256, user, password(secret), extensions)
    assert not server.complete


def test_without_a_secret_key_no_token_logs_in() -> None:
    server = ScramServer(SCRAM_SHA_256, ImageScramCredentials(image_with_token), "servernonce")
    with pytest.raises(SaslError):
        login(server, SCRAM_SHA_256, TOKEN_ID, password(), ",tokenauth=true")


def test_an_ordinary_login_is_not_token_authenticated() -> None:
    source = ImageScramCredentials(image_with_token, SECRET)
    assert source.scram_credential(TOKEN_ID, SCRAM_SHA_256) is None
    assert not KafkaPrincipal("User", "alice").token_authenticated
    # equality ignores the flag, as Kafka's KafkaPrincipal.equals
    assert KafkaPrincipal("User", "a", token_authenticated=True) == KafkaPrincipal("User", "a")
