"""kafka-python message classes for AddRaftVoter (80) and RemoveRaftVoter (81), KIP-853, which
kafka-python 3.0 does not ship: each loads its Kafka 3.9 JSON schema (v0, the version Kafka
3.9's broker serves) from ``protocol/schemas`` through kafka-python's ``load_json`` class
keyword, as ``token_messages.py`` does for the delegation-token APIs."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from pykraft.protocol import schemas


class AddRaftVoterRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class AddRaftVoterResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class RemoveRaftVoterRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class RemoveRaftVoterResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass
