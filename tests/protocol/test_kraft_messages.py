"""UnregisterBroker's message classes (``protocol/kraft_messages.py``): Kafka's v0 layout byte for
byte (flexible: compact strings, an empty tagged-field section after each struct), and the codec
table serves them like kafka-python's own."""

from __future__ import annotations

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response, response_class
from pykraft.protocol.kraft_messages import UnregisterBrokerRequest, UnregisterBrokerResponse


def test_the_request_is_the_broker_id_and_no_tags() -> None:
    body = bytes(UnregisterBrokerRequest(version=0, broker_id=7).encode(version=0))
    assert body == b"\x00\x00\x00\x07" + b"\x00"
    assert decode_request(ApiKey.UNREGISTER_BROKER, 0, body).broker_id == 7


def test_the_response_layout() -> None:
    response = UnregisterBrokerResponse(
        version=0, throttle_time_ms=3, error_code=102, error_message="gone"
    )
    body = bytes(encode_response(ApiKey.UNREGISTER_BROKER, 0, response))
    # throttle int32, error int16, compact nullable string (length + 1), tags.
    assert body == b"\x00\x00\x00\x03" + b"\x00\x66" + b"\x05gone" + b"\x00"
    null = UnregisterBrokerResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None)
    # A null message is compact length 0.
    assert bytes(encode_response(ApiKey.UNREGISTER_BROKER, 0, null)) == bytes(8)


def test_the_codec_table_names_these_classes() -> None:
    assert response_class(ApiKey.UNREGISTER_BROKER) is UnregisterBrokerResponse
    assert UnregisterBrokerRequest.API_KEY == UnregisterBrokerResponse.API_KEY == 64
    assert UnregisterBrokerRequest.is_request() and not UnregisterBrokerResponse.is_request()
