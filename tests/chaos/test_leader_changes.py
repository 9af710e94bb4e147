"""Leader changes end to end, on the real chaos cluster (3 controllers, 3 brokers).

What Kafka promises around a leader change (KIP-631 fencing and controlled shutdown, KIP-101 /
KIP-279 truncation, Kafka's ``unclean.leader.election.enable``), checked with real processes and
a real client (kafka-python):

* a paused (SIGSTOP) leader is fenced once ``broker.session.timeout.ms`` passes without a
  heartbeat, and loses its leaderships then — not before, not much later; each new leader's
  epoch is higher; the broker rejoins every ISR when it comes back;
* a killed (SIGKILL) leader is fenced sooner: its connections close, and the active controller
  ends its session ``pykraft.broker.exited.grace.ms`` (200 ms) after its metadata long poll's and
  idle heartbeat's connections both closed (``pykraft.broker.channel.closed.timeout.ms``, 1 s,
  after one alone) — before any
  session expiry could have fenced it; also when the broker began polling a standby, which
  names the active controller so its polls move there;
* a SIGTERM runs a controlled shutdown that moves leadership away at once; a preferred-leader
  election (POST /v1/elections) moves it back; a producer meanwhile gets NOT_LEADER_OR_FOLLOWER,
  refreshes its metadata and carries on, losing no acknowledged record;
* an old leader holding records nobody else has (written with acks=1 while its followers were
  stopped) truncates them when it returns as a follower, and rejoins the ISR;
* with every ISR member dead, a partition stays leaderless unless its topic enables unclean
  leader election, in which case an out-of-sync replica takes over (and its history wins).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pykraft.storage.records import SimpleRecord, build_batch
from tests.chaos.checker import (
    compare_replicas,
    encode_value,
    segment_batches,
)
from tests.chaos.election_checker import check_cluster
from tests.chaos.harness import (
    BROKER_IDS,
    HEARTBEAT_INTERVAL_MS,
    SESSION_TIMEOUT_MS,
    ChaosBroker,
    ChaosCluster,
    Workload,
    produce,
    raw_produce,
    read_to_end,
)
from tests.chaos.history_checker import check

pytestmark = pytest.mark.chaos

NOT_LEADER_OR_FOLLOWER = 6  # org.apache.kafka.common.protocol.Errors
RECOVERED, RECOVERING = 0, 1  # org.apache.kafka.metadata.LeaderRecoveryState
# Between the fencing deadline and the admin API showing the new leader: the controller's
# timer, committing the PartitionChange records, and this test's 100 ms polling.
FENCE_SLACK_S = 1.0
# A controlled shutdown moves leadership in the first heartbeat that asks for it.
CONTROLLED_SHUTDOWN_MOVE_S = 1.0


def led_by(cluster: ChaosCluster, topic: str, broker_id: int) -> list[int]:
    return [p["partition"] for p in cluster.topic(topic) if p["leader"] == broker_id]


def assert_nothing_lost(workload: Workload, cluster: ChaosCluster, partitions: int) -> None:
    final_log = read_to_end(cluster.bootstrap_servers, workload.topic, partitions)
    report = check(workload.history(final_log))
    assert report.operations["send ok"] > 0
    assert report.bad() == {}, report.render()


def assert_replicas_agree(cluster: ChaosCluster, topic: str) -> None:
    for partition in cluster.topic(topic):
        index = partition["partition"]
        replicas = [cluster.broker(r) for r in partition["replicas"]]
        logs = {b.node_id: segment_batches(b.data_dir / f"{topic}-{index}") for b in replicas}
        high_watermarks = {
            b.node_id: b.partitions(topic)[index]["high_watermark"] for b in replicas
        }
        assert (
            compare_replicas(
                partition=index,
                leader_id=partition["leader"],
                logs=logs,
                high_watermarks=high_watermarks,
            )
            == []
        )


def start_producing(
    cluster: ChaosCluster, topic: str
) -> tuple[dict[int, dict[str, Any]], ChaosBroker, Workload]:
    """A new 3-partition RF=3 topic (min.insync.replicas 2) with a workload acknowledging
    records: its partitions as created, and the broker leading partition 0 (the victim)."""
    cluster.create_topic(topic, 3, 3, {"min.insync.replicas": "2"})
    before = {p["partition"]: p for p in cluster.topic(topic)}
    victim = cluster.broker(before[0]["leader"])
    workload = Workload(cluster.bootstrap_servers, topic, 3)
    workload.start()
    try:
        cluster.eventually(lambda: workload.acknowledged_count() > 20, "producing")
    except BaseException:
        workload.stop()
        raise
    return before, victim, workload


@pytest.fixture
def producer_warnings() -> Iterator[list[str]]:
    """kafka-python's producer warnings (the errors it retried) while the test runs."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect(logging.WARNING)
    logger = logging.getLogger("kafka.producer.sender")
    logger.addHandler(handler)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)


def test_a_paused_leader_is_fenced_within_the_session_timeout_and_rejoins(
    cluster: ChaosCluster,
) -> None:
    topic = "fenced"
    before, victim, workload = start_producing(cluster, topic)
    try:
        paused_at = time.monotonic()
        victim.pause()
        took = cluster.eventually(
            lambda: not led_by(cluster, topic, victim.node_id),
            f"broker {victim.node_id} loses its leaderships",
        )
        # The last heartbeat came at most one interval before the pause (KIP-631 fencing).
        session_s, interval_s = SESSION_TIMEOUT_MS / 1000, HEARTBEAT_INTERVAL_MS / 1000
        assert session_s - interval_s <= took <= session_s + FENCE_SLACK_S, took
        after = {p["partition"]: p for p in cluster.topic(topic)}
        for index, partition in before.items():
            if partition["leader"] == victim.node_id:
                assert after[index]["leader"] not in (victim.node_id, -1)
                assert after[index]["leader_epoch"] > partition["leader_epoch"]
                assert victim.node_id not in after[index]["isr"]
        time.sleep(max(0.0, paused_at + session_s + 1.5 - time.monotonic()))
        victim.resume()
        # Unfenced again and caught up: back in every ISR (it leads nothing until an election).
        cluster.eventually(
            lambda: all(victim.node_id in p["isr"] for p in cluster.topic(topic)),
            f"broker {victim.node_id} rejoins every ISR",
        )
    finally:
        workload.stop()
    assert_nothing_lost(workload, cluster, 3)
    cluster.eventually(lambda: cluster.in_sync(topic), "replicas converge")
    assert_replicas_agree(cluster, topic)


def test_a_killed_leader_is_fenced_before_its_session_could_expire(cluster: ChaosCluster) -> None:
    topic = "killed"
    before, victim, workload = start_producing(cluster, topic)
    try:
        victim.kill()
        took = cluster.eventually(
            lambda: not led_by(cluster, topic, victim.node_id),
            f"broker {victim.node_id} loses its leaderships",
        )
        # A session expiry fences at the earliest one heartbeat interval short of the session
        # timeout after the kill; the closed connection must have fenced it before that.
        session_s, interval_s = SESSION_TIMEOUT_MS / 1000, HEARTBEAT_INTERVAL_MS / 1000
        assert took < session_s - interval_s, took
        after = {p["partition"]: p for p in cluster.topic(topic)}
        for index, partition in before.items():
            assert victim.node_id not in after[index]["isr"]
            if partition["leader"] == victim.node_id:
                assert after[index]["leader"] not in (victim.node_id, -1)
        # acks=all writes go on through the two ISR members left (min.insync.replicas=2).
        acknowledged = workload.acknowledged_count()
        cluster.eventually(lambda: workload.acknowledged_count() > acknowledged + 20, "producing")
        cluster.restart(victim)
        cluster.eventually(
            lambda: all(victim.node_id in p["isr"] for p in cluster.topic(topic)),
            f"broker {victim.node_id} rejoins every ISR",
        )
    finally:
        workload.stop()
    assert_nothing_lost(workload, cluster, 3)
    cluster.eventually(lambda: cluster.in_sync(topic), "replicas converge")


def test_a_killed_broker_polling_a_standby_first_is_fenced_as_exited(
    cluster: ChaosCluster,
) -> None:
    """Only the active controller watches a broker's connections. A broker starts polling the
    first bootstrap controller; made a standby here, it names the active controller in its
    answer and the broker polls there from then on (quorum/service.py ``get_records``), so a
    kill -9 still closes both watched connections and the exited-process rule fences it."""
    controllers = cluster.controllers
    first = controllers.controllers[0]
    try:
        if controllers.wait_for_leader() is first:
            first.kill()
            controllers.wait_for_leader(exclude=first.node_id)
            first.start()
        victim = cluster.broker(BROKER_IDS[-1])
        victim.kill()
        cluster.eventually(lambda: fenced(cluster, victim.node_id), "the first kill is fenced")
        cluster.restart(victim)  # a new process: its metadata client starts at `first`
        leader = controllers.wait_for_leader()
        assert leader is not first
        time.sleep(1.0)  # the answer naming the leader, and a poll waiting there
        logged = leader.log_path.read_text(errors="replace")
        victim.kill()
        cluster.eventually(lambda: fenced(cluster, victim.node_id), "the second kill is fenced")
        fences = [
            line
            for line in leader.log_path.read_text(errors="replace")[len(logged) :].splitlines()
            if f"fenced broker(s) [{victim.node_id}]" in line
        ]
        assert len(fences) == 1 and "its process exited" in fences[0], fences
    finally:
        if not first.alive():
            first.start()
        controllers.wait_for_leader()


def fenced(cluster: ChaosCluster, broker_id: int) -> bool:
    brokers = cluster.request("GET", "/v1/brokers")["brokers"]
    return any(b["broker_id"] == broker_id and b["fenced"] for b in brokers)


def test_controlled_shutdown_and_preferred_election_move_leadership_and_clients_follow(
    cluster: ChaosCluster, producer_warnings: list[str]
) -> None:
    topic = "handover"
    cluster.create_topic(
        topic, 1, configs={"min.insync.replicas": "2"}, assignments={"0": [10, 11, 12]}
    )
    [before] = cluster.topic(topic)
    preferred = cluster.broker(10)
    assert before["leader"] == 10
    workload = Workload(cluster.bootstrap_servers, topic, 1)
    workload.start()
    try:
        cluster.eventually(lambda: workload.acknowledged_count() > 20, "producing")
        # SIGTERM: the broker asks to shut down in its next heartbeat (sent at once), and the
        # controller moves its leaderships before letting it go (KIP-631).
        assert preferred.process is not None
        preferred.process.terminate()
        took = cluster.eventually(
            lambda: not led_by(cluster, topic, 10), "leadership moves off the stopping broker"
        )
        assert took <= CONTROLLED_SHUTDOWN_MOVE_S, took
        assert preferred.process.wait(40) == 0
        [moved] = cluster.topic(topic)
        assert moved["leader"] in (11, 12) and moved["leader_epoch"] > before["leader_epoch"]
        acknowledged = workload.acknowledged_count()
        cluster.eventually(
            lambda: workload.acknowledged_count() > acknowledged + 20,
            "the producer carries on with the new leader",
        )

        cluster.restart(preferred)
        cluster.eventually(lambda: 10 in cluster.topic(topic)[0]["isr"], "10 rejoins the ISR")
        answer = cluster.request(
            "POST",
            "/v1/elections",
            {"election_type": "preferred", "partitions": [{"topic": topic, "partitions": [0]}]},
        )
        assert answer["results"][0]["partitions"][0]["error"] == "NONE", answer
        [back] = cluster.topic(topic)
        assert back["leader"] == 10 and back["leader_epoch"] > moved["leader_epoch"]
        acknowledged = workload.acknowledged_count()
        cluster.eventually(
            lambda: workload.acknowledged_count() > acknowledged + 20,
            "the producer carries on with the preferred leader",
        )
        # The old leader, a follower now, refuses a produce with NOT_LEADER_OR_FOLLOWER ...
        old = cluster.broker(moved["leader"])
        batch = build_batch([SimpleRecord(value=b"to the wrong broker")])
        assert raw_produce(old.kafka_port, topic, 0, batch)[0] == NOT_LEADER_OR_FOLLOWER
    finally:
        workload.stop()
    # ... which the producer met, retried after refreshing its metadata, and lost nothing.
    assert any("NotLeaderForPartitionError" in line for line in producer_warnings), (
        producer_warnings
    )
    assert_nothing_lost(workload, cluster, 1)
    cluster.eventually(lambda: cluster.in_sync(topic), "replicas converge")
    assert_replicas_agree(cluster, topic)


def pause_all(brokers: list[ChaosBroker]) -> None:
    for broker in brokers:
        broker.pause()


def test_a_returning_old_leader_truncates_what_diverged_and_rejoins_the_isr(
    cluster: ChaosCluster,
) -> None:
    """KIP-101: records only the old leader wrote (acks=1, followers stopped) are truncated
    when it comes back as a follower of a leader that wrote other records at those offsets."""
    topic = "diverged"
    cluster.create_topic(
        topic, 1, configs={"min.insync.replicas": "2"}, assignments={"0": [11, 12, 10]}
    )
    committed = produce(cluster.bootstrap_servers, topic, [encode_value(i) for i in range(50)])
    cluster.eventually(lambda: cluster.in_sync(topic), "replicas in sync")
    [before] = cluster.topic(topic)
    old_leader = cluster.broker(before["leader"])
    followers = [b for b in cluster.brokers if b is not old_leader]

    # Stop the followers for well under the session and ISR-lag timeouts; by the time the
    # acks=1 writes arrive, their last fetches have been answered (replica.fetch.wait.max.ms),
    # so the writes reach the old leader's log only.
    pause_all(followers)
    try:
        time.sleep(0.5)
        # Straight to the old leader: a client would also ask the stopped brokers for metadata.
        only_old = [encode_value(i) for i in range(1000, 1020)]
        batch = build_batch([SimpleRecord(value=value) for value in only_old])
        error_code, base_offset = raw_produce(old_leader.kafka_port, topic, 0, batch, acks=1)
        old_leader.kill()
    finally:
        for broker in followers:
            broker.resume()
    assert (error_code, base_offset) == (0, committed[-1].offset + 1)
    cluster.eventually(
        lambda: cluster.topic(topic)[0]["leader"] not in (-1, old_leader.node_id),
        "a follower takes over",
    )
    [after] = cluster.topic(topic)
    assert after["leader_epoch"] > before["leader_epoch"]
    # The new leader writes other records at the offsets only the old leader had.
    overwritten = produce(
        cluster.bootstrap_servers, topic, [encode_value(i) for i in range(2000, 2030)]
    )
    assert overwritten[0].offset == base_offset

    cluster.restart(old_leader)
    cluster.eventually(
        lambda: old_leader.node_id in cluster.topic(topic)[0]["isr"],
        f"broker {old_leader.node_id} rejoins the ISR",
    )
    cluster.eventually(lambda: cluster.in_sync(topic), "replicas converge")
    assert_replicas_agree(cluster, topic)  # the old leader's segment files included
    final = read_to_end(cluster.bootstrap_servers, topic, 1)[0]
    assert final == [*committed, *overwritten]
    assert not set(only_old) & {p.value for p in final}


def test_unclean_leader_election_is_off_by_default_and_works_when_enabled(
    cluster: ChaosCluster,
) -> None:
    """Kafka's ``unclean.leader.election.enable`` (default false): with the whole ISR dead,
    an out-of-sync replica may lead only when the topic allows it."""
    clean, unclean = "clean", "unclean"
    first, second = cluster.broker(10), cluster.broker(11)
    for topic, configs in ((clean, {}), (unclean, {"unclean.leader.election.enable": "true"})):
        cluster.create_topic(topic, 1, configs=configs, assignments={"0": [10, 11]})
    assert (
        cluster.request("GET", f"/v1/topics/{clean}")["configs"]["unclean.leader.election.enable"]
        == "false"
    )
    both = [clean, unclean]
    early = {
        t: produce(cluster.bootstrap_servers, t, [encode_value(i) for i in range(10)]) for t in both
    }
    cluster.eventually(lambda: all(cluster.in_sync(t) for t in both), "replicas in sync")

    second.kill()  # fenced after the session timeout: out of both ISRs
    cluster.eventually(
        lambda: all(cluster.topic(t)[0]["isr"] == [10] for t in both), "11 leaves the ISRs"
    )
    late = {
        t: produce(cluster.bootstrap_servers, t, [encode_value(i) for i in range(10, 20)])
        for t in both
    }  # acknowledged by 10 alone (min.insync.replicas=1)
    first.kill()
    cluster.eventually(
        lambda: all(cluster.topic(t)[0]["leader"] == -1 for t in both), "both partitions leaderless"
    )

    cluster.restart(second)  # out of sync: may lead only where unclean election is enabled
    cluster.eventually(lambda: cluster.topic(unclean)[0]["leader"] == 11, "unclean election")
    time.sleep(1.0)
    assert cluster.topic(clean)[0]["leader"] == -1
    # KIP-704: an unclean leader starts RECOVERING, alone in the ISR.
    [elected] = cluster.topic(unclean)
    assert (elected["isr"], elected["leader_recovery_state"]) == ([11], RECOVERING)
    # The unclean leader's history wins: what only 10 had is gone.
    assert read_to_end(cluster.bootstrap_servers, unclean, 1)[0] == early[unclean]

    cluster.restart(first)
    cluster.eventually(lambda: cluster.topic(clean)[0]["leader"] == 10, "clean leader back")
    cluster.eventually(lambda: all(cluster.in_sync(t) for t in both), "replicas converge")
    assert read_to_end(cluster.bootstrap_servers, clean, 1)[0] == early[clean] + late[clean]
    assert read_to_end(cluster.bootstrap_servers, unclean, 1)[0] == early[unclean]
    # The ISR expansion that let 10 back in marked the recovery done.
    assert cluster.topic(unclean)[0]["leader_recovery_state"] == RECOVERED
    for topic in both:
        assert_replicas_agree(cluster, topic)
    # The election checker over the same metadata log (tests/chaos/election_checker.py): the
    # one unclean election is seen as such, and allowed by the topic's configuration.
    elections = check_cluster(cluster.controllers)
    assert elections.violations == (), elections.render()
    assert elections.of_topic(unclean).by_cause()["unclean"] == 1
    assert elections.of_topic(clean).by_cause()["unclean"] == 0
