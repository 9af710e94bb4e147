"""The SASL authenticator's state machine (Kafka's SaslServerAuthenticator), frames in and out.

Scenarios follow SaslAuthenticatorTest: testValidSaslPlainOverPlaintext,
testInvalidPasswordSaslPlain, testUnauthenticatedApiVersionsRequest*, testInvalidSaslPacket,
testInvalidApiVersionsRequestSequence, testDisallowedKafkaRequestsBeforeAuthentication,
testMechanismPluggability / unsupported mechanism, testScramAuthentication."""

from __future__ import annotations

from typing import Any

import pytest
import scramp

from pykraft.broker.sasl_mechanisms import (
    PLAIN,
    SCRAM_MIN_ITERATIONS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    PlainServer,
    PlainUsers,
    SaslError,
    ScramServer,
    StaticScramCredentials,
)
from pykraft.broker.sasl_server import (
    MAX_SASL_TOKENS,
    SaslAuthenticator,
    SaslState,
    SaslStep,
)
from pykraft.metadata.auth.principal import KafkaPrincipal, user
from pykraft.metadata.auth.scram import ScramMechanism, credential_from_password
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from pykraft.protocol.framing import encode_frame
from pykraft.protocol.headers import (
    RequestHeader,
    encode_request_header,
    parse_response_header,
    request_header_version,
    response_header_version,
)

USERS = PlainUsers.from_passwords({"alice": "alice-secret"})
CREDENTIALS = StaticScramCredentials(
    {
        ("bob", mechanism): credential_from_password(
            ScramMechanism.from_mechanism_name(mechanism),
            "bob-secret",
            b"0123456789abcdef",
            SCRAM_MIN_ITERATIONS,
        )
        for mechanism in (SCRAM_SHA_256, SCRAM_SHA_512)
    }
)
GENERIC_FAILURE = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-512"
)


def authenticator() -> SaslAuthenticator:
    return SaslAuthenticator(
        {
            PLAIN: lambda: PlainServer(USERS),
            SCRAM_SHA_512: lambda: ScramServer(SCRAM_SHA_512, CREDENTIALS, "servernonce"),
        }
    )


def frame(api_key: ApiKey, version: int, correlation_id: int = 7, **fields: Any) -> bytes:
    header = RequestHeader(
        api_key, version, correlation_id, "test", request_header_version(api_key, version)
    )
    body = bytes(request_class(api_key)(version=version, **fields).encode(version=version))
    return encode_request_header(header) + body


def response(step: SaslStep, api_key: ApiKey, version: int) -> Any:
    assert step.response is not None
    data = step.response.to_bytes(lambda _: b"")[4:]
    _, body_start = parse_response_header(data, response_header_version(api_key, version))
    return decode_response(api_key, version, memoryview(data)[body_start:])


def handshake(auth: SaslAuthenticator, mechanism: str, version: int = 1) -> Any:
    step = auth.handle_frame(frame(ApiKey.SASL_HANDSHAKE, version, mechanism=mechanism))
    return response(step, ApiKey.SASL_HANDSHAKE, version), step


def authenticate(auth: SaslAuthenticator, token: bytes, version: int = 2) -> tuple[Any, SaslStep]:
    step = auth.handle_frame(frame(ApiKey.SASL_AUTHENTICATE, version, auth_bytes=token))
    return response(step, ApiKey.SASL_AUTHENTICATE, version), step


def test_plain_after_api_versions() -> None:
    auth = authenticator()
    step = auth.handle_frame(frame(ApiKey.API_VERSIONS, 3, client_software_name="t",
                                   client_software_version="1"))  # fmt: skip
    versions = response(step, ApiKey.API_VERSIONS, 3)
    assert versions.error_code == 0 and not step.close
    assert auth.state.name == "HANDSHAKE_REQUEST"
    answer, step = handshake(auth, PLAIN)
    assert (answer.error_code, answer.mechanisms) == (0, ["PLAIN", "SCRAM-SHA-512"])
    answer, step = authenticate(auth, b"\0alice\0alice-secret")
    assert answer.error_code == 0 and step.principal == user("alice") and not step.close
    assert auth.state is SaslState.COMPLETE


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0mallory\0alice-secret", "Authentication failed: Invalid username or password"),
        (b"\0\0x", "Authentication failed: username not specified"),
        (b"\0alice\0", "Authentication failed: password not specified"),
        (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an "
         "authorization id that is different from username"),
        (b"garbage", "Authentication failed during authentication due to invalid credentials "
         "with SASL mechanism PLAIN"),
        (b"\xff\0\xfe\0", "Authentication failed during authentication due to invalid "
         "credentials with SASL mechanism PLAIN"),
    ],
)  # fmt: skip
def test_plain_failures_answer_sasl_authentication_failed_then_close(
    token: bytes, message: str
) -> None:
    auth = authenticator()
    handshake(auth, PLAIN)
    answer, step = authenticate(auth, token)
    assert answer.error_code == Errors.SASL_AUTHENTICATION_FAILED
    assert answer.error_message == message
    assert step.close and step.principal is None and auth.state is SaslState.FAILED


def test_unsupported_mechanism_lists_the_enabled_ones_then_closes() -> None:
    auth = authenticator()
    answer, step = handshake(auth, "GSSAPI")
    assert answer.error_code == Errors.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-512"]
    assert step.close


@pytest.mark.parametrize(
    "api_key_frame",
    [
        frame(ApiKey.METADATA, 9, topics=None, allow_auto_topic_creation=False,
              include_cluster_authorized_operations=False,
              include_topic_authorized_operations=False),
        frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"\0alice\0alice-secret"),
        b"\x00\x03",  # a header cut short
    ],
)  # fmt: skip
def test_requests_before_the_handshake_close_without_answer(api_key_frame: bytes) -> None:
    auth = authenticator()
    step = auth.handle_frame(api_key_frame)
    assert step.close and step.response is None and step.principal is None


def test_a_second_api_versions_closes() -> None:
    auth = authenticator()
    auth.handle_frame(frame(ApiKey.API_VERSIONS, 0))
    step = auth.handle_frame(frame(ApiKey.API_VERSIONS, 0))
    assert step.close and step.response is None


def test_other_requests_during_authentication_close() -> None:
    auth = authenticator()
    handshake(auth, PLAIN)
    answer, step = handshake(auth, PLAIN)
    assert answer.error_code == Errors.ILLEGAL_SASL_STATE and step.close


def test_unsupported_api_versions_is_answered_and_the_client_may_retry() -> None:
    auth = authenticator()
    header = RequestHeader(ApiKey.API_VERSIONS, 99, 1, "t", 2)
    step = auth.handle_frame(encode_request_header(header))
    assert response(step, ApiKey.API_VERSIONS, 0).error_code == Errors.UNSUPPORTED_VERSION
    assert not step.close and auth.state is SaslState.HANDSHAKE_OR_VERSIONS_REQUEST


def scram_exchange(auth: SaslAuthenticator, password: str, version: int = 2) -> SaslStep:
    client = scramp.ScramClient([SCRAM_SHA_512], "bob", password)
    handshake(auth, SCRAM_SHA_512)
    answer, step = authenticate(auth, client.get_client_first().encode(), version)
    assert answer.error_code == 0
    client.set_server_first(answer.auth_bytes.decode())
    answer, step = authenticate(auth, client.get_client_final().encode(), version)
    if answer.error_code == 0:
        client.set_server_final(answer.auth_bytes.decode())  # verifies the server signature
    else:
        assert (answer.error_code, answer.error_message) == (
            Errors.SASL_AUTHENTICATION_FAILED,
            GENERIC_FAILURE,
        )
    return step


@pytest.mark.parametrize("version", [0, 1, 2])
def test_scram_sha_512(version: int) -> None:
    auth = authenticator()
    step = scram_exchange(auth, "bob-secret", version)
    assert step.principal == user("bob") and auth.state is SaslState.COMPLETE


def test_scram_wrong_password_gets_the_generic_message() -> None:
    auth = authenticator()
    step = scram_exchange(auth, "wrong")
    assert step.close and step.principal is None


def test_scram_unknown_user_does_not_say_so() -> None:
    auth = authenticator()
    handshake(auth, SCRAM_SHA_512)
    client = scramp.ScramClient([SCRAM_SHA_512], "nobody", "x")
    answer, step = authenticate(auth, client.get_client_first().encode())
    assert (answer.error_code, answer.error_message) == (
        Errors.SASL_AUTHENTICATION_FAILED,
        GENERIC_FAILURE,
    )
    assert step.close and "nobody" in step.reason  # logged, not sent


def test_handshake_v0_then_raw_tokens() -> None:
    auth = authenticator()
    handshake(auth, PLAIN, version=0)
    step = auth.handle_frame(b"\0alice\0alice-secret")
    assert step.principal == user("alice")
    assert step.response is not None and step.response.to_bytes(lambda _: b"") == encode_frame(b"")


def test_handshake_v0_wrong_password_just_closes() -> None:
    auth = authenticator()
    handshake(auth, PLAIN, version=0)
    step = auth.handle_frame(b"\0alice\0nope")
    assert step.close and step.response is None


def test_tokens_are_bounded() -> None:
    class Endless:
        complete = False
        authorization_id = ""
        principal = KafkaPrincipal("User", "never")

        def evaluate_response(self, token: bytes) -> bytes:
            return b"more"

    auth = SaslAuthenticator({PLAIN: Endless})
    handshake(auth, PLAIN)
    for _ in range(MAX_SASL_TOKENS):
        assert not authenticate(auth, b"x")[1].close
    step = auth.handle_frame(frame(ApiKey.SASL_AUTHENTICATE, 2, auth_bytes=b"x"))
    assert step.close


def test_scram_accepts_librdkafka_2_0s_repeated_client_nonce() -> None:
    # A real exchange with kcat 1.7 / librdkafka 2.0 (Debian), server nonce and salt fixed:
    # its client-final nonce repeats the client nonce. Kafka's ScramSaslServer accepts it
    # (nonce().endsWith(serverFirstMessage.nonce())), and the proof verifies.
    server = ScramServer(SCRAM_SHA_512, CREDENTIALS, "abcdefghijklmnop-_xyz")
    client_nonce = "zv]dMzW[eoYU|/QV:0xxjIJDd9JT[Tc3"
    first = server.evaluate_response(f"n,,n=bob,r={client_nonce}".encode())
    assert first.startswith(f"r={client_nonce}abcdefghijklmnop-_xyz,".encode())
    final = server.evaluate_response(
        f"c=biws,r={client_nonce}{client_nonce}abcdefghijklmnop-_xyz,"
        "p=EGYPsNRs2n9I6kpnF0MCeUHa5VrvJ0Q5yxxHoENL8ZbC1pvXQ6MqT40wkB8UO3rRfP9TRbr4lNylzu72w9oCeg==".encode()
    )
    assert final.startswith(b"v=") and server.complete and server.authorization_id == "bob"


def test_scram_refuses_a_nonce_without_the_servers_part() -> None:
    server = ScramServer(SCRAM_SHA_512, CREDENTIALS, "servernonce")
    server.evaluate_response(b"n,,n=bob,r=abc")
    with pytest.raises(SaslError):
        server.evaluate_response(b"c=biws,r=abcother,p=AAAA")
