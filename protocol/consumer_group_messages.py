"""kafka-python message classes for the consumer group protocol (KIP-848): ConsumerGroupHeartbeat
(68) and ConsumerGroupDescribe (69) at Kafka 3.9's version 0, which kafka-python 3.0 does not
ship. Each loads its Kafka JSON schema from ``protocol/schemas`` (fields only) through
kafka-python's ``load_json`` class keyword, as ``protocol.token_messages`` does."""

from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from pykraft.protocol import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas):  # type: ignore[misc,call-arg]
    pass
