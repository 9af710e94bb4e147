"""How ``admin_client`` sorts a broker's answer: done, failed for good (``AdminError``, with the
sentence Kafka's admin handlers use), or worth retrying — the rules of Kafka's
``clients/admin/internals`` handlers, kept apart from the client's I/O (pure).
"""

from __future__ import annotations

from pykraft.admin_codec import AbortTransactionSpec, PartitionProducers
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

# The coordinator lookup and DescribeTransactionsHandler: look the coordinator up again.
RETRIABLE_COORDINATOR_ERRORS = frozenset(
    {Errors.COORDINATOR_LOAD_IN_PROGRESS, Errors.COORDINATOR_NOT_AVAILABLE, Errors.NOT_COORDINATOR}
)
# AbortTransactionHandler.handleError: find the leader again.
RETRIABLE_ABORT_ERRORS = frozenset(
    {
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.REPLICA_NOT_AVAILABLE,
        Errors.BROKER_NOT_AVAILABLE,
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
)
MAX_PORT = 65535
# ``fetcher.broker_connection`` raises one error type, its message naming the phase that failed
# ("<peer>: SASL failed: ...", "<peer>: connect failed: [SSL: CERTIFICATE_VERIFY_FAILED] ...",
# "<peer>: reconnecting in N ms after K failure(s)"); these marks tell the kinds apart.
AUTHENTICATION_FAILURE_MARKS = (": SASL failed: ", "CERTIFICATE_VERIFY_FAILED")
RECONNECT_NOTICE_MARK = ": reconnecting in "


class AdminError(Exception):
    """A call failed for good; ``str()`` is the sentence to show, ``error`` Kafka's code."""

    def __init__(self, message: str, error: Errors | None = None) -> None:
        super().__init__(message)
        self.error = error


class BootstrapError(ValueError):
    """``--bootstrap-server`` does not parse (Kafka's ``ClientUtils.parseAndValidateAddresses``)."""


def parse_bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``; an IPv6 host in brackets (``[::1]:9092``)."""
    servers = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        host, colon, port = entry.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not colon or not host or not port.isdigit() or not 0 < int(port) <= MAX_PORT:
            raise BootstrapError(f"Invalid url in bootstrap.servers: {entry}")
        servers.append((host, int(port)))
    if not servers:
        raise BootstrapError("No resolvable bootstrap urls given in bootstrap.servers")
    return servers


def is_authentication_failure(message: str) -> bool:
    """A SASL exchange or the server's certificate was refused: Kafka's admin client fails the
    call at once (``AuthenticationException`` is not retriable), as a wrong password or trust
    store will not fix itself."""
    return any(mark in message for mark in AUTHENTICATION_FAILURE_MARKS)


def is_reconnect_notice(message: str) -> bool:
    """A connection backing off after failures: says nothing of why they failed."""
    return RECONNECT_NOTICE_MARK in message


def producers_done(tp: TopicPartition, answer: PartitionProducers, broker_id: int | None) -> bool:
    """``DescribeProducersHandler.handlePartitionError``: True when done, False to retry (the
    leader moved — unless a broker was named, whose answer stands — or the topic is not known
    there yet); anything else fails the call."""
    error = answer.error
    if error is Errors.NONE:
        return True
    if error is Errors.NOT_LEADER_OR_FOLLOWER and broker_id is None:
        return False
    if error is Errors.UNKNOWN_TOPIC_OR_PARTITION:
        return False
    where = f" on brokerId {broker_id}" if broker_id is not None else ""
    detail = f" ({answer.error_message})" if answer.error_message else ""
    raise AdminError(
        f"Failed to describe active producers for partition {tp}{where}: {error.name}{detail}",
        error,
    )


def abort_failure(spec: AbortTransactionSpec, error: Errors) -> str:
    """``AbortTransactionHandler.handleError``'s sentences for the errors not retried."""
    if error is Errors.CLUSTER_AUTHORIZATION_FAILED:
        return f"WriteTxnMarkers request with {spec} failed due to cluster authorization error"
    if error is Errors.INVALID_PRODUCER_EPOCH:
        return f"WriteTxnMarkers request with {spec} failed due an invalid producer epoch"
    if error is Errors.TRANSACTION_COORDINATOR_FENCED:
        return (
            f"WriteTxnMarkers request with {spec} failed since the provided coordinator epoch "
            f"{spec.coordinator_epoch} has been fenced by the active coordinator"
        )
    return f"WriteTxnMarkers request with {spec} failed due to unexpected error: {error.name}"
