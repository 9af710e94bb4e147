"""The broker's own RPCs to the active controller: registration, heartbeats, the metadata log,
AlterPartition and producer-id blocks (KIP-631, KIP-497, KIP-730).

Why a module of its own: these are the calls one broker process makes about itself, each a
route of ``metadata/api/brokers.py`` or ``metadata/api/records.py``; the operators' calls
(topics, configs, ACLs, SCRAM) are in ``controller_admin_calls.py``, and the transport both
share (redirects, retries, error mapping) in ``controller_transport.py``. ``ControllerClient``
(``controller_client.py``) is the two families over one transport.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_transport import REQUEST_TIMEOUT_S, ControllerTransport
from pykraft.broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from pykraft.metadata.api import brokers, records, routes
from pykraft.metadata.api.brokers import BrokerHeartbeatResponse as HeartbeatReply
from pykraft.metadata.api.brokers import BrokerRegistrationReply
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, parse_json_object
from pykraft.metadata.api.records import RecordsPage
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature

# The broker's id and current broker epoch (-1 before it is registered).
BrokerIdentity = Callable[[], tuple[int, int]]


class BrokerRpcs(ControllerTransport):
    """The broker RPC routes, one method each (``ControllerClient`` has them all)."""

    # Set by a broker process (``identify_as``); tools and tests read anonymously.
    _identity: BrokerIdentity | None = None

    def identify_as(self, identity: BrokerIdentity) -> None:
        """Name the registered broker in every metadata long poll, so the active controller can
        tell its process died when the connection closes (quorum/managers/sessions.py)."""
        self._identity = identity

    async def register_broker(
        self,
        *,
        broker_id: int,
        incarnation_id: str,
        endpoints: Sequence[BrokerEndpoint],
        rack: str | None,
        features: Sequence[BrokerFeature] = (),
        previous_broker_epoch: int = -1,
        deadline_s: float | None = None,
    ) -> BrokerRegistrationReply:
        """POST /v1/brokers/register (KIP-631); idempotent for one incarnation id."""
        request = brokers.BrokerRegistrationRequest(
            broker_id=broker_id,
            incarnation_id=incarnation_id,
            listeners=tuple(endpoints),
            rack=rack,
            features=tuple(features),
            previous_broker_epoch=previous_broker_epoch,
        )
        return await self._write_route(
            routes.REGISTER_BROKER,
            brokers.registration_request_to_json(request),
            brokers.registration_reply_from_json,
            deadline_s=deadline_s,
        )

    async def heartbeat(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shut_down: bool,
        offline_log_dirs: OfflineLogDirs = NO_OFFLINE_LOG_DIRS,
        counters: brokers.BrokerTopicCounters | None = None,
        counters_sampled_ms: int | None = None,
        deadline_s: float | None = None,
    ) -> HeartbeatReply:
        request = brokers.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            current_metadata_offset=current_metadata_offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
            offline_log_dirs=offline_log_dirs.directory_ids,
            offline_replicas=tuple(
                brokers.OfflineReplica(topic_id, partition)
                for topic_id, partition in offline_log_dirs.replicas
            ),
            counters=counters,
            counters_sampled_ms=counters_sampled_ms,
        )
        return await self._write_route(
            routes.BROKER_HEARTBEAT,
            brokers.heartbeat_request_to_json(request),
            brokers.heartbeat_response_from_json,
            deadline_s=deadline_s,
        )

    async def fetch_records(
        self, from_offset: int, *, max_wait_ms: int, max_records: int
    ) -> RecordsPage:
        """GET /v1/metadata/records (long poll); raises ``SnapshotRequiredError`` below the
        controller's window and ``ControllerError`` for an undecodable record."""
        broker_id, broker_epoch = (-1, -1) if self._identity is None else self._identity()
        if broker_epoch < 0:
            broker_id = -1
        query = records.RecordsQuery(
            from_offset=from_offset,
            max_wait_ms=max_wait_ms,
            max_records=max_records,
            broker_id=broker_id,
            broker_epoch=broker_epoch,
        )
        route = routes.METADATA_RECORDS
        payload = await self._call(
            route,
            route.path(),
            params=records.records_query_to_params(query),
            timeout_s=REQUEST_TIMEOUT_S + max_wait_ms / 1000,
        )
        try:
            page = parse_json_object(payload, max_depth=None)
            return records.records_page_from_json(Fields(page))
        except JsonBodyError as error:
            raise ControllerError(
                "CORRUPT_MESSAGE", f"undecodable metadata from offset {from_offset}: {error}"
            ) from None

    async def download_snapshot(self, snapshot_id: str) -> bytes:
        """GET /v1/metadata/snapshots/{id}: the snapshot file's bytes."""
        route = routes.GET_SNAPSHOT
        return await self._call(
            route, route.path(snapshot_id=snapshot_id), timeout_s=REQUEST_TIMEOUT_S * 4
        )

    async def alter_partition(
        self,
        *,
        broker_id: int,
        broker_epoch: int,
        partitions: Sequence[brokers.AlterPartitionData],
    ) -> tuple[brokers.AlterPartitionResult, ...]:
        """POST /v1/alter-partition; one result per partition (its ``error`` may be set)."""
        request = brokers.AlterPartitionRequest(
            broker_id=broker_id, broker_epoch=broker_epoch, partitions=tuple(partitions)
        )
        answer = await self._write_route(
            routes.ALTER_PARTITION,
            brokers.alter_partition_request_to_json(request),
            brokers.alter_partition_response_from_json,
        )
        return answer.partitions

    async def allocate_producer_ids(self, *, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """POST /v1/producer-ids (KIP-730): (first producer id, block length)."""
        request = brokers.AllocateProducerIdsRequest(broker_id, broker_epoch)
        answer = await self._write_route(
            routes.ALLOCATE_PRODUCER_IDS,
            brokers.producer_ids_request_to_json(request),
            brokers.producer_ids_response_from_json,
        )
        return answer.producer_id_start, answer.producer_id_len

    async def unregister_broker(self, broker_id: int) -> None:
        route = routes.UNREGISTER_BROKER
        await self._write(
            route, route.path(broker_id=broker_id), None, brokers.unregister_answer_from_json
        )
