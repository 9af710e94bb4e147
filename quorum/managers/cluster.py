"""Broker lifecycle: registration, heartbeats, fencing, controlled shutdown, unregistration.

Theory of operation (KIP-631, Kafka's ``ClusterControlManager`` and the broker parts of
``ReplicationControlManager``). A broker registers with an incarnation id and gets a broker
epoch: the metadata offset its ``RegisterBrokerRecord`` will have (``image.offset + 1 + its index
in the batch``). It starts fenced. It heartbeats with the metadata offset it has applied; once
that reaches its registration offset it is unfenced and may lead. A broker whose session expires
(``broker.session.timeout.ms`` without a heartbeat) is fenced by ``fence_stale_broker``. Fencing,
controlled shutdown and unregistration all first move the broker's leaderships away and remove it
from every ISR (``generate_leader_and_isr_updates``), in the same atomic batch as the broker's
own record, so the image never shows a fenced broker leading.

KIP-966 (eligible leader replicas on): a broker whose registration's PreviousBrokerEpoch is not
the epoch of its last registration shut down uncleanly, so its logs may miss acknowledged
records: the registration also takes it out of every ISR and ELR (Kafka's
``handleBrokerUncleanShutdown``), and it may lead again only after rejoining the ISR.

A new incarnation of a registered broker id replaces the old one unless the old one's session is
still alive (``DUPLICATE_BROKER_REGISTRATION``); the old incarnation's leaderships and ISR
memberships are dropped in the same batch because the new registration starts fenced.

Heartbeat state transitions are listed in ``quorum.managers.sessions``. A heartbeat may also
report failed log dirs (KIP-858 ``OfflineLogDirs``): an active broker then leaves the ISR and
leadership of its replicas there (``quorum.managers.directories``).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from pykraft.metadata.api.brokers import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import BrokerRegistration, MetadataImage
from pykraft.metadata.records import (
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    MetadataRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    kafka_string_to_uuid,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.cluster_checks import check_broker_epoch
from pykraft.quorum.managers.directories import (
    handle_directories_offline,
    validate_offline_dirs,
)
from pykraft.quorum.managers.elr import ElectionPolicy
from pykraft.quorum.managers.partition_change import (
    generate_leader_and_isr_updates,
    leads_any,
    partitions_with_broker_in_elr,
    partitions_with_broker_in_isr,
    partitions_without_leader,
)
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.managers.sessions import (
    BrokerControlState,
    BrokerSessions,
    HeartbeatInput,
    current_broker_state,
    next_broker_state,
)

UncleanPolicy = Callable[[str], bool]


def _validate_registration(request: BrokerRegistrationRequest) -> ApiError:
    if request.broker_id < 0:
        return ApiError.of(
            Errors.INVALID_REQUEST,
            f"Invalid broker id {request.broker_id}: it must be non-negative.",
        )
    try:
        kafka_string_to_uuid(request.incarnation_id)
    except ValueError as error:
        return ApiError.of(Errors.INVALID_REQUEST, f"Invalid incarnation id: {error}")
    names = [listener.name for listener in request.listeners]
    if len(set(names)) != len(names):
        return ApiError.of(Errors.INVALID_REQUEST, "Listener names must be unique.")
    for listener in request.listeners:
        if not 0 < listener.port < 65536:
            return ApiError.of(
                Errors.INVALID_REQUEST,
                f"Invalid port {listener.port} for listener {listener.name}.",
            )
    return SUCCESS


def fence_records(
    image: MetadataImage,
    registration: BrokerRegistration,
    unclean: UncleanPolicy,
    sessions: BrokerSessions,
) -> list[MetadataRecord]:
    """Kafka's ``handleBrokerFenced``: leave every ISR and leadership, then fence."""
    records: list[MetadataRecord] = list(
        generate_leader_and_isr_updates(
            image,
            partitions_with_broker_in_isr(image, registration.id),
            unclean_enabled=unclean,
            broker_to_remove=registration.id,
            replica_offline=sessions.replica_offline(image),
        )
    )
    records.append(
        BrokerRegistrationChangeRecord(
            broker_id=registration.id,
            broker_epoch=registration.epoch,
            fenced=BrokerRegistrationFencingChange.FENCE.value,
        )
    )
    return records


def _shut_down_uncleanly(
    existing: BrokerRegistration | None,
    request: BrokerRegistrationRequest,
    unclean: UncleanPolicy,
) -> bool:
    """KIP-966 (Kafka's ``ClusterControlManager.registerBroker`` as KAFKA-15582 wrote it): a new
    incarnation whose PreviousBrokerEpoch is not the epoch the controller knows did not shut
    down cleanly — its logs may have lost acknowledged records. Only with ELR on; a retried
    registration of the same incarnation is not a restart. (Kafka since KAFKA-16952 treats
    every new incarnation so; the KIP's rule keeps a cleanly restarted broker in the ELR.)"""
    if not isinstance(unclean, ElectionPolicy) or unclean.min_isr is None:
        return False
    if existing is None:
        return True
    return (
        existing.incarnation_id != request.incarnation_id
        and request.previous_broker_epoch != existing.epoch
    )


def register_broker(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    sessions: BrokerSessions,
    now_ms: int,
    unclean: UncleanPolicy,
) -> ControllerResult[BrokerRegistrationResponse]:
    error = _validate_registration(request)
    if error.is_failure():
        return ControllerResult((), BrokerRegistrationResponse(error))
    existing = image.cluster.brokers.get(request.broker_id)
    records: list[MetadataRecord] = []
    if (
        existing is not None
        and sessions.has_valid_session(existing, now_ms)
        and existing.incarnation_id != request.incarnation_id
    ):
        return ControllerResult(
            (),
            BrokerRegistrationResponse(
                ApiError.of(
                    Errors.DUPLICATE_BROKER_REGISTRATION,
                    "Another broker is registered with that broker id.",
                )
            ),
        )
    if _shut_down_uncleanly(existing, request, unclean):
        # KIP-966: out of every ISR and ELR, and never elected, in this same batch.
        records.extend(
            generate_leader_and_isr_updates(
                image,
                chain(
                    partitions_with_broker_in_isr(image, request.broker_id),
                    partitions_with_broker_in_elr(image, request.broker_id),
                ),
                unclean_enabled=unclean,
                broker_to_remove=request.broker_id,
                broker_with_unclean_shutdown=request.broker_id,
                replica_offline=sessions.replica_offline(image),
            )
        )
    elif existing is not None:
        # The new registration starts fenced: the old one must not keep leading.
        records.extend(
            generate_leader_and_isr_updates(
                image,
                partitions_with_broker_in_isr(image, existing.id),
                unclean_enabled=unclean,
                broker_to_remove=existing.id,
                replica_offline=sessions.replica_offline(image),
            )
        )
    broker_epoch = image.offset + 1 + len(records)
    records.append(
        RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=broker_epoch,
            end_points=request.listeners,
            features=request.features,
            rack=request.rack,
            fenced=True,
            in_controlled_shutdown=False,
        )
    )
    sessions.register(request.broker_id, broker_epoch, now_ms)
    return ControllerResult(tuple(records), BrokerRegistrationResponse(SUCCESS, broker_epoch))


def _transition_records(
    image: MetadataImage,
    registration: BrokerRegistration,
    next_state: BrokerControlState,
    sessions: BrokerSessions,
    unclean: UncleanPolicy,
) -> list[MetadataRecord]:
    broker_id = registration.id
    if next_state in (BrokerControlState.FENCED, BrokerControlState.SHUTDOWN_NOW):
        return fence_records(image, registration, unclean, sessions)
    if next_state is BrokerControlState.UNFENCED:
        records: list[MetadataRecord] = [
            BrokerRegistrationChangeRecord(
                broker_id=broker_id,
                broker_epoch=registration.epoch,
                fenced=BrokerRegistrationFencingChange.UNFENCE.value,
            )
        ]
        records.extend(
            generate_leader_and_isr_updates(
                image,
                partitions_without_leader(image),
                unclean_enabled=unclean,
                broker_to_add=broker_id,
                replica_offline=sessions.replica_offline(image),
            )
        )
        return records
    # CONTROLLED_SHUTDOWN: Kafka's handleBrokerInControlledShutdown.
    records = [
        BrokerRegistrationChangeRecord(
            broker_id=broker_id,
            broker_epoch=registration.epoch,
            in_controlled_shutdown=BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN.value,
        )
    ]
    records.extend(
        generate_leader_and_isr_updates(
            image,
            partitions_with_broker_in_isr(image, broker_id),
            unclean_enabled=unclean,
            broker_to_remove=broker_id,
            replica_offline=sessions.replica_offline(image),
        )
    )
    sessions.begin_controlled_shutdown(registration, image.offset + len(records))
    return records


def broker_heartbeat(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    sessions: BrokerSessions,
    now_ms: int,
    unclean: UncleanPolicy,
    received_ms: int,
) -> ControllerResult[BrokerHeartbeatResponse]:
    """Kafka's ``ReplicationControlManager.processBrokerHeartbeat``; ``received_ms`` is when
    it arrived (its call-in: ``managers/sessions.py``)."""
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error.is_success():
        error = validate_offline_dirs(request.offline_log_dirs, request.offline_replicas)
    if error.is_failure():
        return ControllerResult((), BrokerHeartbeatResponse(error))
    registration = image.cluster.brokers[request.broker_id]
    sessions.report_offline_replicas(
        registration,
        frozenset((replica.topic_id, replica.partition_id) for replica in request.offline_replicas),
    )
    current = current_broker_state(registration)
    heartbeat = HeartbeatInput(
        current=current,
        want_fence=request.want_fence,
        want_shut_down=request.want_shut_down,
        current_metadata_offset=request.current_metadata_offset,
        registration_offset=registration.epoch,
        controlled_shutdown_offset=sessions.controlled_shutdown_offset(registration, image.offset),
        lowest_active_offset=sessions.lowest_active_offset(image),
        in_controlled_shutdown_in_image=registration.in_controlled_shutdown,
    )
    next_state = next_broker_state(heartbeat, lambda: leads_any(image, request.broker_id))
    records: list[MetadataRecord] = []
    if next_state is not current:
        records = _transition_records(image, registration, next_state, sessions, unclean)
    elif not next_state.fenced:
        # Kafka's processBrokerHeartbeat: handleDirectoriesOffline unless the broker is fenced
        # (a fenced broker is in no ISR). A state change above already moved every leadership.
        records = list(
            handle_directories_offline(
                image,
                request.broker_id,
                request.offline_replicas,
                unclean,
                sessions.replica_offline(image),
            )
        )
    sessions.touch(registration, now_ms, request.current_metadata_offset, received_ms)
    return ControllerResult(
        tuple(records),
        BrokerHeartbeatResponse(
            SUCCESS,
            is_caught_up=request.current_metadata_offset >= registration.epoch,
            is_fenced=next_state.fenced,
            in_controlled_shutdown=next_state.in_controlled_shutdown,
            should_shut_down=next_state.should_shut_down,
        ),
    )


def unregister_broker(
    image: MetadataImage,
    request: UnregisterBrokerRequest,
    sessions: BrokerSessions,
    unclean: UncleanPolicy,
) -> ControllerResult[UnregisterBrokerResponse]:
    """Kafka's ``ReplicationControlManager.unregisterBroker``."""
    registration = image.cluster.brokers.get(request.broker_id)
    if registration is None:
        return ControllerResult(
            (),
            UnregisterBrokerResponse(
                ApiError.of(
                    Errors.BROKER_ID_NOT_REGISTERED,
                    f"Broker ID {request.broker_id} is not currently registered",
                )
            ),
        )
    records: list[MetadataRecord] = list(
        generate_leader_and_isr_updates(
            image,
            partitions_with_broker_in_isr(image, registration.id),
            unclean_enabled=unclean,
            broker_to_remove=registration.id,
            replica_offline=sessions.replica_offline(image),
        )
    )
    # KIP-966 (Kafka's handleBrokerUnregistered): a broker that is gone leaves every ELR too.
    records.extend(
        generate_leader_and_isr_updates(
            image,
            partitions_with_broker_in_elr(image, registration.id),
            unclean_enabled=unclean,
            broker_to_remove=registration.id,
            broker_with_unclean_shutdown=registration.id,
            replica_offline=sessions.replica_offline(image),
        )
    )
    records.append(
        UnregisterBrokerRecord(broker_id=registration.id, broker_epoch=registration.epoch)
    )
    sessions.remove(registration.id)
    return ControllerResult(tuple(records), UnregisterBrokerResponse(SUCCESS))


def fence_stale_broker(
    image: MetadataImage, sessions: BrokerSessions, now_ms: int, unclean: UncleanPolicy
) -> ControllerResult[tuple[int, ...]]:
    """Fence the longest-silent stale broker, if any (Kafka's ``maybeFenceOneStaleBroker``).

    One broker per batch, as Kafka does, so each fencing's leader moves are computed against an
    image that already shows the previous one; call again after the batch commits.
    """
    stale = sessions.stale_brokers(image, now_ms)
    if not stale:
        return ControllerResult((), ())
    registration = image.cluster.brokers[stale[0]]
    return ControllerResult(
        tuple(fence_records(image, registration, unclean, sessions)), (stale[0],)
    )
