"""WriteTxnMarkers (v1; v0 went with KIP-896): the transaction coordinator's request to
partition leaders, defined once for both ends (Kafka's ``WriteTxnMarkersRequest.TxnMarkerEntry``,
KIP-98).

Each entry is a ``storage.txn_markers.TxnMarker``: the leaders of its partitions append an
end-transaction marker (a control batch, COMMIT or ABORT) for its producer id at its producer
epoch, as its coordinator epoch. The coordinator encodes the request and decodes the answer here
(``broker.txn_marker_channel``); the leader's handler reads the same request into the same values.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class, response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

MarkerResults = dict[tuple[int, TopicPartition], Errors]


def encode_write_txn_markers(markers: Sequence[TxnMarker], version: int) -> bytes:
    request_type: Any = request_class(ApiKey.WRITE_TXN_MARKERS)
    entries = []
    for marker in markers:
        by_topic: dict[str, list[int]] = {}
        for tp in marker.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        entries.append(
            request_type.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.commit,
                topics=[
                    request_type.WritableTxnMarker.WritableTxnMarkerTopic(
                        name=topic, partition_indexes=partitions
                    )
                    for topic, partitions in by_topic.items()
                ],
                coordinator_epoch=marker.coordinator_epoch,
            )
        )
    return bytes(request_type(version=version, markers=entries).encode(version=version))


def write_txn_markers_request(message: Any) -> tuple[TxnMarker, ...]:
    """A decoded request (kafka-python's object) as the markers it asks for."""
    return tuple(
        TxnMarker(
            producer_id=entry.producer_id,
            producer_epoch=entry.producer_epoch,
            coordinator_epoch=entry.coordinator_epoch,
            commit=bool(entry.transaction_result),
            partitions=tuple(
                TopicPartition(topic.name, partition)
                for topic in entry.topics
                for partition in topic.partition_indexes
            ),
        )
        for entry in message.markers
    )


def write_txn_markers_response(version: int, results: MarkerResults) -> Any:
    """The answer, marker by marker (producer id), topic by topic."""
    response_type: Any = response_class(ApiKey.WRITE_TXN_MARKERS)
    by_producer: dict[int, dict[str, list[tuple[int, Errors]]]] = {}
    for (producer_id, tp), error in results.items():
        by_producer.setdefault(producer_id, {}).setdefault(tp.topic, []).append(
            (tp.partition, error)
        )
    marker_type = response_type.WritableTxnMarkerResult
    topic_type = marker_type.WritableTxnMarkerTopicResult
    partition_type = topic_type.WritableTxnMarkerPartitionResult
    return response_type(
        version=version,
        markers=[
            marker_type(
                producer_id=producer_id,
                topics=[
                    topic_type(
                        name=topic,
                        partitions=[
                            partition_type(partition_index=index, error_code=error)
                            for index, error in partitions
                        ],
                    )
                    for topic, partitions in topics.items()
                ],
            )
            for producer_id, topics in by_producer.items()
        ],
    )


def decode_write_txn_markers_response(
    body: memoryview | bytes, version: int, markers: Sequence[TxnMarker]
) -> MarkerResults:
    """Every marker partition's error; one the answer leaves out is UNKNOWN_SERVER_ERROR."""
    response = decode_response(ApiKey.WRITE_TXN_MARKERS, version, body)
    results: MarkerResults = {
        (marker.producer_id, tp): Errors.UNKNOWN_SERVER_ERROR
        for marker in markers
        for tp in marker.partitions
    }
    for marker in response.markers:
        for topic in marker.topics:
            for partition in topic.partitions:
                key = (marker.producer_id, TopicPartition(topic.name, partition.partition_index))
                if key in results:
                    results[key] = Errors(partition.error_code)
    return results
