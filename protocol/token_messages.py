"""kafka-python message classes for the delegation token APIs (KIP-48), which kafka-python 3.0
does not ship: each loads its Kafka JSON schema from ``protocol/schemas`` through
kafka-python's ``load_json`` class keyword, so they code and decode like its own classes."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from pykraft.protocol import schemas


class CreateDelegationTokenRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class CreateDelegationTokenResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class RenewDelegationTokenRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class RenewDelegationTokenResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class ExpireDelegationTokenRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class ExpireDelegationTokenResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class DescribeDelegationTokenRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class DescribeDelegationTokenResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass
