"""Sending transaction markers to partition leaders: what the broker provides
(``TxnMarkerChannel``) and how markers are routed and their outcomes reported (the I/O half of
Kafka's ``TransactionMarkerChannelManager``).

The pure coordinator asks for markers per transaction (``SendMarkers``); this module finds each
partition's leader through ``TxnMarkerChannel.leader_of``, groups the markers of every
transaction by leader (at most ``MAX_MARKERS_PER_REQUEST`` per WriteTxnMarkers request), sends
them, and turns what comes back into one ``MarkerReport`` per transaction and request for
``TransactionCoordinator.on_markers_written``:

* a partition whose topic no longer exists (``leader_of`` is None) is reported deleted: it needs
  no marker (Kafka: "these partitions are likely deleted already and hence can be skipped");
* a partition without a leader right now (``leader_of`` is ``NO_LEADER``) is reported
  LEADER_NOT_AVAILABLE, and so retried after a backoff, to the leader found then;
* a request that fails (an exception: the connection was lost, say) reports NETWORK_EXCEPTION
  for all its partitions; one that takes longer than ``request.timeout.ms`` REQUEST_TIMED_OUT;
  a partition the answer leaves out UNKNOWN_SERVER_ERROR — all retried.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Protocol

import attrs

from pykraft.coordinator.transaction.effects import SendMarkers
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

NO_LEADER = -1
# Markers per WriteTxnMarkers request (a load can find many prepared transactions at once).
MAX_MARKERS_PER_REQUEST = 500


class TxnMarkerChannel(Protocol):
    """How the coordinator reaches partition leaders (the integrator's, over the inter-broker
    listener; the local broker may be reached directly)."""

    def leader_of(self, topic_partition: TopicPartition, /) -> int | None:
        """The id of the partition's leader; ``NO_LEADER`` (-1) when it has none right now;
        None when the partition does not exist (its topic was deleted)."""
        ...

    async def write_txn_markers(
        self, broker_id: int, markers: Sequence[TxnMarker], /
    ) -> dict[tuple[int, TopicPartition], Errors]:
        """WriteTxnMarkers to ``broker_id``: the error per (producer id, partition). Raises
        when no answer came (a lost connection, an unreachable broker)."""
        ...


@attrs.frozen
class MarkerReport:
    """What became of one transaction's markers in one request."""

    transactional_id: str
    coordinator_epoch: int
    errors: dict[TopicPartition, Errors]
    deleted: tuple[TopicPartition, ...] = ()


@attrs.frozen
class Route:
    """The markers of one request to one broker."""

    broker_id: int
    sends: tuple[SendMarkers, ...]


def route_markers(
    sends: Sequence[SendMarkers], leader_of: Callable[[TopicPartition], int | None]
) -> tuple[list[Route], list[MarkerReport]]:
    """Split ``sends`` by leader: the requests to make, and the reports known without one."""
    by_broker: dict[int, list[SendMarkers]] = {}
    reports = []
    for send in sends:
        partitions_of: dict[int, list[TopicPartition]] = {}
        deleted: list[TopicPartition] = []
        unavailable: dict[TopicPartition, Errors] = {}
        for tp in send.marker.partitions:
            leader = leader_of(tp)
            if leader is None:
                deleted.append(tp)
            elif leader < 0:
                unavailable[tp] = Errors.LEADER_NOT_AVAILABLE
            else:
                partitions_of.setdefault(leader, []).append(tp)
        if deleted or unavailable:
            reports.append(
                MarkerReport(
                    send.transactional_id,
                    send.marker.coordinator_epoch,
                    unavailable,
                    tuple(deleted),
                )
            )
        for broker_id, partitions in partitions_of.items():
            marker = attrs.evolve(send.marker, partitions=tuple(partitions))
            by_broker.setdefault(broker_id, []).append(SendMarkers(send.transactional_id, marker))
    routes = [
        Route(broker_id, tuple(queued[start : start + MAX_MARKERS_PER_REQUEST]))
        for broker_id, queued in sorted(by_broker.items())
        for start in range(0, len(queued), MAX_MARKERS_PER_REQUEST)
    ]
    return routes, reports


async def send_route(
    channel: TxnMarkerChannel, route: Route, timeout_ms: int
) -> tuple[list[MarkerReport], BaseException | None]:
    """Send one request; the reports, and the exception that made it fail (to log)."""
    markers = [send.marker for send in route.sends]
    failure: BaseException | None = None
    try:
        answers = await asyncio.wait_for(
            channel.write_txn_markers(route.broker_id, markers), timeout_ms / 1000
        )
    except TimeoutError:
        answers, missing = {}, Errors.REQUEST_TIMED_OUT
    except Exception as error:  # any failure to get an answer: retried
        answers, missing, failure = {}, Errors.NETWORK_EXCEPTION, error
    else:
        missing = Errors.UNKNOWN_SERVER_ERROR
    reports = [
        MarkerReport(
            send.transactional_id,
            send.marker.coordinator_epoch,
            {
                tp: answers.get((send.marker.producer_id, tp), missing)
                for tp in send.marker.partitions
            },
        )
        for send in route.sends
    ]
    return reports, failure
