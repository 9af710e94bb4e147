"""What the pure transaction coordinator asks its shell to do, and the results it answers.

Every call into ``coordinator.transaction.coordinator.TransactionCoordinator`` returns one
``Effects``:

* ``answers``: (request id, result) pairs. A request is answered in the ``Effects`` of the call
  that carried it (an error found at once) or of a later one: InitProducerId, AddPartitionsToTxn
  and EndTxn once their ``__transaction_state`` append is done (``on_append_done``).
* ``appends``: records for a ``__transaction_state`` partition, to append with acks=-1; the shell
  reports the outcome with ``TransactionCoordinator.on_append_done(write_id, error, now_ms)``.
* ``markers``: WriteTxnMarkers to send for one transaction (Kafka's ``TxnMarkerEntry``); the shell
  finds each partition's leader, sends, and reports with ``on_markers_written``.

The results carry Kafka's fields (``InitProducerIdResult`` of ``TransactionCoordinator.scala``,
DescribeTransactions' and ListTransactions' ``TransactionState``); handlers turn them into
responses. The coordinator answers PRODUCER_FENCED where Kafka's coordinator does;
``error_for_version`` gives what an older request version gets instead (KIP-588).
"""

from __future__ import annotations

import attrs

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from pykraft.storage.txn_markers import TxnMarker


@attrs.frozen
class ProducerIdAndEpoch:
    """Kafka's ``ProducerIdAndEpoch``: what InitProducerId v3+ names as the current producer."""

    producer_id: int
    epoch: int


@attrs.frozen
class InitProducerIdResult:
    error: Errors
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@attrs.frozen
class TxnResult:
    """AddPartitionsToTxn (v0-v3), AddOffsetsToTxn and EndTxn answer one error."""

    error: Errors


Result = InitProducerIdResult | TxnResult


@attrs.frozen(kw_only=True)
class TransactionDescription:
    """DescribeTransactions' ``TransactionState`` for one id (zero values with an error)."""

    transactional_id: str
    error: Errors
    state: str = ""
    transaction_timeout_ms: int = 0
    transaction_start_time_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    # topic -> partitions in the transaction, both sorted.
    topics: tuple[tuple[str, tuple[int, ...]], ...] = ()


@attrs.frozen
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    # When its transaction started (-1: none yet); ListTransactions v1 filters on it (KIP-994).
    txn_start_timestamp_ms: int = -1


@attrs.frozen(kw_only=True)
class ListTransactionsResult:
    error: Errors
    # State filters that name no state Kafka knows (answered, not an error).
    unknown_state_filters: tuple[str, ...] = ()
    transactions: tuple[TransactionListing, ...] = ()


@attrs.frozen
class Answer:
    request_id: int
    result: Result


@attrs.frozen
class TxnLogRecord:
    key: bytes
    # None: a tombstone (the transactional id expired).
    value: bytes | None


@attrs.frozen(kw_only=True)
class Append:
    """Records for partition ``partition`` of ``__transaction_state``, written as one batch."""

    write_id: int
    partition: int
    records: tuple[TxnLogRecord, ...]
    timestamp_ms: int
    # How long the append may wait for the ISR (Kafka: the transaction timeout, or
    # request.timeout.ms for tombstones).
    timeout_ms: int


@attrs.frozen
class SendMarkers:
    """Write ``marker`` to the leaders of its partitions, for ``transactional_id``."""

    transactional_id: str
    marker: TxnMarker


@attrs.define
class Effects:
    answers: list[Answer] = attrs.Factory(list)
    appends: list[Append] = attrs.Factory(list)
    markers: list[SendMarkers] = attrs.Factory(list)

    def answer(self, request_id: int, result: Result) -> None:
        self.answers.append(Answer(request_id, result))

    def merge(self, other: Effects) -> None:
        self.answers.extend(other.answers)
        self.appends.extend(other.appends)
        self.markers.extend(other.markers)

    def result_for(self, request_id: int) -> Result | None:
        """This request's answer, if these effects carry it (tests and the shell)."""
        for answer in self.answers:
            if answer.request_id == request_id:
                return answer.result
        return None


# The first version of each API that understands PRODUCER_FENCED (KIP-588, Kafka 2.7);
# ``KafkaApis`` answers INVALID_PRODUCER_EPOCH to older ones.
_PRODUCER_FENCED_SINCE = {
    ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 2,
    ApiKey.ADD_OFFSETS_TO_TXN: 2,
    ApiKey.END_TXN: 2,
}


def error_for_version(error: Errors, api: ApiKey, version: int) -> Errors:
    """The error a request of ``api`` at ``version`` gets for ``error`` (``KafkaApis``: "older
    clients cannot understand the new PRODUCER_FENCED error code")."""
    since = _PRODUCER_FENCED_SINCE.get(api)
    if error is Errors.PRODUCER_FENCED and since is not None and version < since:
        return Errors.INVALID_PRODUCER_EPOCH
    return error
