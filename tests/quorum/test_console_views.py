"""The web console's view models and HTML (``quorum/console_views.py``, ``console_html.py``):
an image in, rows out, values escaped. No server, no browser (tests/integration/
test_console_browser.py loads the pages in Chromium)."""

from __future__ import annotations

import json

import attrs
from immutables import Map

from pykraft.metadata.api.admin import QuorumDescription, RaftStatus, VoterStatus
from pykraft.metadata.image import (
    BrokerRegistration,
    ClusterImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pykraft.metadata.records import BrokerEndpoint
from pykraft.quorum import console_html
from pykraft.quorum.console_views import (
    ControllerRow,
    GroupOffsetRow,
    Member,
    PartitionRow,
    RateSample,
    TopicRow,
    broker_rows,
    broker_state,
    controller_rows,
    counters_by_leader,
    group_offset_rows,
    journal_rows,
    partition_rows,
    rates_per_s,
    topic_page,
    topic_row,
    total_lag,
)
from pykraft.quorum.service_console import TopicRowsCache


def partition(
    replicas: tuple[int, ...], isr: tuple[int, ...], leader: int
) -> PartitionRegistration:
    return PartitionRegistration(replicas=replicas, isr=isr, leader=leader, leader_epoch=3)


def topic(name: str, *partitions: PartitionRegistration) -> TopicImage:
    return TopicImage(name=name, topic_id=f"id-{name}", partitions=Map(enumerate(partitions)))


def broker(broker_id: int, fenced: bool = False, shutdown: bool = False) -> BrokerRegistration:
    return BrokerRegistration(
        id=broker_id,
        epoch=10 + broker_id,
        incarnation_id=f"inc-{broker_id}",
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9090 + broker_id),),
        fenced=fenced,
        in_controlled_shutdown=shutdown,
    )


def image(*topics: TopicImage, brokers: tuple[int, ...] = (1, 2)) -> MetadataImage:
    return MetadataImage(
        offset=41,
        cluster=ClusterImage(brokers=Map({b: broker(b) for b in brokers})),
        topics=TopicsImage(
            by_id=Map({t.topic_id: t for t in topics}), by_name=Map({t.name: t for t in topics})
        ),
    )


EVERYTHING = set  # a caller who may DESCRIBE every topic


def test_topic_rows_mark_under_replicated_and_offline_partitions() -> None:
    orders = topic(
        "orders",
        partition((1, 2), (1, 2), 1),
        partition((1, 2), (2,), 2),  # under-replicated
        partition((1, 2), (), -1),  # offline (and under-replicated)
    )
    assert topic_row(orders) == TopicRow("orders", 3, 2, under_replicated=2, offline=1)
    rows = partition_rows(orders, {0: 7})
    assert [(r.partition, r.under_replicated, r.offline, r.log_end_offset) for r in rows] == [
        (0, False, False, 7),
        (1, True, False, None),
        (2, True, True, None),
    ]


def test_topic_page_counts_every_visible_topic_and_shows_one_page() -> None:
    topics = [topic(f"t{i:03}", partition((1,), (1,), 1)) for i in range(250)]
    listing = topic_page(image(*topics), EVERYTHING, page=3, per_page=100)
    assert (listing.page, listing.pages, listing.topics, listing.partitions) == (3, 3, 250, 250)
    assert [r.name for r in listing.rows] == [f"t{i:03}" for i in range(200, 250)]
    assert topic_page(image(*topics), EVERYTHING, page=99).page == 3  # clamped
    hidden = topic_page(image(*topics), lambda names: {"t001"})
    assert (hidden.topics, [r.name for r in hidden.rows]) == (1, ["t001"])


def test_broker_rows_count_leaders_and_replicas_with_kafka_states() -> None:
    snapshot = image(topic("a", partition((1, 2), (1, 2), 1), partition((2, 1), (2, 1), 2)))
    rows = broker_rows(snapshot, {1: 5.0})
    assert [(r.broker_id, r.state, r.leaders, r.replicas, r.records_in_per_s) for r in rows] == [
        (1, "RUNNING", 1, 2, 5.0),
        (2, "RUNNING", 1, 2, None),
    ]
    assert rows[0].endpoints == "PLAINTEXT://127.0.0.1:9091"
    assert broker_state(fenced=True, in_controlled_shutdown=False) == "FENCED"
    assert broker_state(fenced=False, in_controlled_shutdown=True) == "PENDING_CONTROLLED_SHUTDOWN"


def test_controller_rows_from_the_quorum() -> None:
    def voter(node_id: int, lag: int | None) -> VoterStatus:
        return VoterStatus(
            node_id=node_id, raft_address="x", url=f"http://c{node_id}", connected=True,
            match_index=None, lag=lag,
        )  # fmt: skip

    quorum = QuorumDescription(
        node_id=1, state="leader", leader_id=1, leader_url=None, raft_term=4,
        committed_offset=9, applied_offset=9, log_start_offset=0,
        raft=RaftStatus(commit_index=9, last_applied=9, log_entries=9, has_quorum=True),
        voters=(voter(2, 3), voter(1, 0)),
    )  # fmt: skip
    assert controller_rows(quorum) == (
        ControllerRow(1, "leader", 4, 0, "http://c1"),
        ControllerRow(2, "follower", 4, 3, "http://c2"),
    )


def test_group_rows_in_kafka_order_with_lag() -> None:
    members = [
        Member("m-small", "/10.0.0.1", "c1", (("t", 2),)),
        Member("m-big", "/10.0.0.2", "c2", (("t", 1), ("t", 0))),
    ]
    committed = {("t", 0): 5, ("t", 1): 9, ("u", 0): 1}
    ends = {("t", 0): 8, ("t", 1): 9, ("t", 2): 4}
    rows = group_offset_rows(members, committed, ends)
    assert [(r.topic, r.partition, r.consumer_id, r.lag) for r in rows] == [
        ("t", 0, "m-big", 3),
        ("t", 1, "m-big", 0),
        ("t", 2, "m-small", None),  # nothing committed yet
        ("u", 0, "-", None),  # committed, unassigned, log end unknown
    ]
    assert total_lag(rows) == 3
    assert total_lag([GroupOffsetRow("t", 0, None, 4)]) is None


def test_journal_rows_newest_first_with_secrets_redacted() -> None:
    scram = json.dumps(
        {"type": "UserScramCredentialRecord", "version": 0, "name": "alice", "salt": "c2FsdA==",
         "storedKey": "AAA", "serverKey": "BBB", "iterations": 4096}
    ).encode()  # fmt: skip
    topic_record = b'{"type":"TopicRecord","version":0,"name":"orders","topicId":"x"}'
    rows = journal_rows([(10, 2, 0, (topic_record,)), (11, 2, 5, (scram, topic_record))], limit=2)
    assert [(r.offset, r.record_type) for r in rows] == [
        (12, "TopicRecord"),
        (11, "UserScramCredentialRecord"),
    ]
    assert "AAA" not in rows[1].fields and "c2FsdA" not in rows[1].fields
    assert json.loads(rows[1].fields)["storedKey"] == "(redacted)"
    assert json.loads(rows[0].fields) == {"name": "orders", "topicId": "x"}
    no_op = b'{"type":"NoOpRecord","version":0}'
    assert [r.offset for r in journal_rows([(5, 1, 0, (topic_record, no_op))])] == [5]
    assert [r.offset for r in journal_rows([(5, 1, 0, (topic_record, no_op))], no_ops=True)] == [
        6,
        5,
    ]


def test_rates_per_second_between_two_samples() -> None:
    snapshot = image(topic("t", partition((1,), (1,), 1), partition((2,), (2,), 2)))
    first = RateSample(1_000, counters_by_leader(snapshot, {("t", 0): 10, ("t", 1): 4}))
    second = RateSample(3_000, counters_by_leader(snapshot, {("t", 0): 30, ("t", 1): 2}))
    assert rates_per_s(None, first) == {}
    assert rates_per_s(first, second) == {1: 10.0, 2: 0.0}  # a counter going back counts 0
    assert rates_per_s(second, second) == {}
    assert counters_by_leader(snapshot, {("gone", 0): 5}) == {1: 0, 2: 0}


def test_every_value_is_escaped() -> None:
    evil = '<script>alert("x")</script>'
    listing = topic_page(image(topic(evil, partition((1,), (1,), 1))), EVERYTHING)
    html = console_html.page(evil, "/console", console_html.topics(listing), evil)
    group = console_html.group(evil, [GroupOffsetRow(evil, 0, 1, 2, evil, evil, evil)])
    assert "<script>alert" not in html + group
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert 'href="/console/topics/%3Cscript%3Ealert%28%22x%22%29%3C%2Fscript%3E"' in html


def test_partition_marks_render() -> None:
    rows = [
        PartitionRow(0, 1, 3, (1, 2), (1,), under_replicated=True, offline=False),
        PartitionRow(1, -1, 3, (1, 2), (), under_replicated=True, offline=True),
    ]
    html = console_html.topic("t", "id-t", rows, 1, 1)
    assert html.count("under-replicated") == 1 and html.count(">offline<") == 1


def test_topic_rows_are_kept_while_the_topics_image_is_the_same() -> None:
    cache = TopicRowsCache()
    first = image(topic("a", partition((1,), (1,), 1)))
    rows = cache.rows_of(first)
    assert cache.rows_of(attrs.evolve(first, offset=99)) is rows  # a NoOpRecord later
    changed = image(topic("a", partition((1, 2), (1,), 1)))
    assert cache.rows_of(changed)["a"] == TopicRow("a", 1, 2, under_replicated=1, offline=0)
