"""KIP-966 through the controller: ELR as brokers are fenced and come back, unclean shutdown
detection at registration, min ISR changes clearing ELR, and the feature switch.

Follows Kafka's ``ReplicationControlManagerTest`` ELR cases (testEligibleLeaderReplicas_*,
testUncleanShutdownBroker...) and the 4.1 operations docs on eligible leader replicas.
"""

from __future__ import annotations

from pykraft.metadata.elr import ELR_FEATURE
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import FeatureLevelRecord
from pykraft.quorum.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    BrokerRegistrationRequest,
    IncrementalAlterConfigsRequest,
    UnregisterBrokerRequest,
)
from tests.quorum.helpers import Harness, apply, endpoint, image_with, incarnation, partition
from tests.quorum.test_cluster_control import heartbeat

TOPIC, BROKER = 2, 4
ALL = {1: "unfenced", 2: "unfenced", 3: "unfenced"}
# name -> [(replicas, isr, leader)] per partition, as image_with takes them.
Topics = dict[str, list[tuple[tuple[int, ...], tuple[int, ...], int]]]


def elr_image(
    topics: Topics,
    configs: dict[tuple[int, str], dict[str, str]] | None = None,
    *,
    elr_level: int = 1,
) -> MetadataImage:
    image = image_with(ALL, topics, {(TOPIC, "t"): {"min.insync.replicas": "2"}, **(configs or {})})
    return apply(image, [FeatureLevelRecord(name=ELR_FEATURE, feature_level=elr_level)])


def state(h: Harness, name: str = "t") -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    p = partition(h.image, name, 0)
    return p.leader, p.isr, p.elr


def test_fencing_below_min_isr_keeps_the_fenced_members_eligible() -> None:
    # RF 3, min.insync.replicas 2. The first member to leave takes the ISR to min ISR: it is
    # not eligible (records may have been acknowledged by the other two alone). Below min ISR
    # the high watermark stops, so later members stay eligible and the ISR may become empty.
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2, 3), 1)]}))
    heartbeat(h, 3, fence=True)
    assert state(h) == (1, (1, 2), ())
    heartbeat(h, 2, fence=True)
    assert state(h) == (1, (1,), (2,))
    heartbeat(h, 1, fence=True)
    assert state(h) == (-1, (), (1, 2))
    # 3 comes back first: it is not eligible, so nobody leads (unclean election is off).
    heartbeat(h, 3)
    assert state(h) == (-1, (), (1, 2))
    # 2 comes back: a clean election from the ELR; ISR = [2], 1 stays eligible.
    heartbeat(h, 2)
    p = partition(h.image, "t", 0)
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state.value) == (2, (2,), (1,), 0)


def test_without_the_feature_the_isr_keeps_its_last_member() -> None:
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2, 3), 1)]}, elr_level=0))
    for broker in (3, 2, 1):
        heartbeat(h, broker, fence=True)
    assert state(h) == (-1, (1,), ())


def test_unclean_election_when_enabled_elects_an_ineligible_replica() -> None:
    configs = {(TOPIC, "t"): {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}}
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2), 1)]}, configs))
    heartbeat(h, 3, fence=True)  # out of sync and fenced
    heartbeat(h, 2, fence=True)
    assert state(h) == (1, (1,), (2,))
    heartbeat(h, 1, fence=True)  # no eligible replica alive: the topic allows an unclean one
    assert state(h) == (-1, (), (1, 2))
    heartbeat(h, 3)
    p = partition(h.image, "t", 0)
    assert (p.leader, p.isr, p.elr, p.leader_recovery_state.value) == (3, (3,), (), 1)


def reregister(h: Harness, broker_id: int, previous_broker_epoch: int) -> None:
    h.now_ms += 20_000  # the old session has expired
    h.run(
        BrokerRegistrationRequest(
            broker_id=broker_id,
            incarnation_id=incarnation(broker_id + 100),
            listeners=(endpoint(broker_id),),
            previous_broker_epoch=previous_broker_epoch,
        )
    )


def test_an_unclean_shutdown_takes_the_broker_out_of_isr_and_elr() -> None:
    # KIP-966 / Kafka's handleBrokerUncleanShutdown: a new incarnation whose PreviousBrokerEpoch
    # is not the epoch the controller knows may have lost acknowledged records.
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2, 3), 1)], "u": [((1, 2), (1, 2), 1)]}))
    heartbeat(h, 3, fence=True)
    heartbeat(h, 2, fence=True)
    assert state(h) == (1, (1,), (2,))
    reregister(h, 2, previous_broker_epoch=-1)
    p, u = partition(h.image, "t", 0), partition(h.image, "u", 0)
    assert (p.isr, p.elr, p.last_known_elr) == ((1,), (), (2,))
    assert u.isr == (1,)  # and out of every ISR it was in


def test_a_clean_restart_stays_eligible() -> None:
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2, 3), 1)]}))
    heartbeat(h, 3, fence=True)
    heartbeat(h, 2, fence=True)
    epoch = h.image.cluster.brokers[2].epoch
    reregister(h, 2, previous_broker_epoch=epoch)
    assert state(h) == (1, (1,), (2,))


def test_an_unregistered_broker_leaves_every_elr() -> None:
    # Kafka's handleBrokerUnregistered scans the ELRs too: a decommissioned broker is no
    # eligible leader (and must not be one should its id register again).
    h = Harness(elr_image({"t": [((1, 2, 3), (1, 2, 3), 1)]}))
    heartbeat(h, 3, fence=True)
    heartbeat(h, 2, fence=True)
    assert state(h) == (1, (1,), (2,))
    h.run(UnregisterBrokerRequest(broker_id=2))
    assert 2 not in h.image.cluster.brokers
    assert state(h) == (1, (1,), ())


def alter(h: Harness, *resources: AlterConfigsResource) -> None:
    h.run(IncrementalAlterConfigsRequest(tuple(resources)))


def set_min_isr(resource_type: int, name: str, value: str) -> AlterConfigsResource:
    config = AlterableConfig("min.insync.replicas", AlterConfigOp.SET, value)
    return AlterConfigsResource(resource_type, name, (config,))


def test_a_min_isr_change_clears_elr() -> None:
    # Kafka's docs: "If min.insync.replicas is updated for a topic, the ELR state will be
    # cleaned"; a cluster-level update (even to the same value) cleans every partition's.
    topics: Topics = {"t": [((1, 2, 3), (1, 2, 3), 1)], "u": [((1, 2, 3), (1, 2, 3), 1)]}
    configs = {(TOPIC, "u"): {"min.insync.replicas": "2"}}
    h = Harness(elr_image(topics, configs))
    heartbeat(h, 3, fence=True)
    heartbeat(h, 2, fence=True)
    assert (state(h, "t")[2], state(h, "u")[2]) == ((2,), (2,))
    alter(h, set_min_isr(TOPIC, "t", "3"))
    assert (state(h, "t")[2], state(h, "u")[2]) == ((), (2,))
    alter(h, set_min_isr(BROKER, "", "2"))
    assert state(h, "u")[2] == ()
