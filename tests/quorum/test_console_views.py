"""The web console's view models and HTML (``quorum/console_views.py``, ``console_html.py``):
an image in, rows out, values escaped. No server, no browser (tests/integration/
test_console_browser.py loads the pages in Chromium)."""

from __future__ import annotations

import json
from collections.abc import Iterable

import attrs
from immutables import Map

from pykraft.metadata.api.admin import QuorumDescription, RaftStatus, VoterStatus
from pykraft.metadata.auth.images import AclsImage
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
from pykraft.quorum.broker_rates import BrokerRates
from pykraft.quorum.console_journal import journal_rows
from pykraft.quorum.console_views import (
    ControllerRow,
    GroupOffsetRow,
    GroupRow,
    Member,
    PartitionRow,
    TopicRow,
    broker_rows,
    broker_state,
    controller_rows,
    group_offset_rows,
    partition_rows,
    topic_page,
    topic_row,
    total_lag,
)
from pykraft.quorum.service_console import TopicRowsCache, VisibleTopicsCache


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


RATES = BrokerRates(
    messages_in=12.5,
    bytes_in=4_096.0,
    bytes_out=20_480.0,
    replication_bytes_in=0.0,
    replication_bytes_out=1_024.0,
    fetch_requests=3.0,
)


def test_broker_rows_count_leaders_and_replicas_with_kafka_states() -> None:
    snapshot = image(topic("a", partition((1, 2), (1, 2), 1), partition((2, 1), (2, 1), 2)))
    rows = broker_rows(snapshot, {1: RATES, 3: RATES})  # broker 3 is not registered
    assert [(r.broker_id, r.state, r.leaders, r.replicas, r.rates) for r in rows] == [
        (1, "RUNNING", 1, 2, RATES),
        (2, "RUNNING", 1, 2, None),
    ]
    assert rows[0].endpoints == "PLAINTEXT://127.0.0.1:9091"
    assert broker_state(fenced=True, in_controlled_shutdown=False) == "FENCED"
    assert broker_state(fenced=False, in_controlled_shutdown=True) == "PENDING_CONTROLLED_SHUTDOWN"


def test_the_brokers_table_shows_the_heartbeat_rates_under_kafka_metric_names() -> None:
    rows = broker_rows(image(), {1: RATES})
    html = console_html.brokers_table(rows)
    cells = [
        "<td class=n>12.5</td>",
        "<td class=n>4,096</td>",
        "<td class=n>20,480</td>",
        "<td class=n>0 / 1,024</td>",  # replication in / out
        "<td class=n>3.0</td>",
    ]
    assert "".join(cells) in html
    assert "<td class=n>-</td>" * 3 + "<td class=n>- / -</td><td class=n>-</td></tr>" in html
    assert (
        '<th title="kafka.server:type=BrokerTopicMetrics,name=BytesOutPerSec (consumer fetches)">'
        "Bytes out /s</th>"
    ) in html
    assert "MessagesInPerSec" in html and "request=Fetch" in html
    assert "Bytes out" not in console_html.brokers_table(rows, rates=False)  # the overview


def test_a_standby_says_where_the_rates_are() -> None:
    note = console_html.rates_elsewhere_note("http://127.0.0.1:9093/")
    assert 'href="http://127.0.0.1:9093/console/brokers"' in note
    assert "kept by the active controller" in note
    assert "none is active" in console_html.rates_elsewhere_note(None)


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
    assert [(r.offset, r.record_type) for r in rows.rows] == [
        (12, "TopicRecord"),
        (11, "UserScramCredentialRecord"),
    ]
    assert "AAA" not in rows.rows[1].fields and "c2FsdA" not in rows.rows[1].fields
    assert json.loads(rows.rows[1].fields)["storedKey"] == "(redacted)"
    assert json.loads(rows.rows[0].fields) == {"name": "orders", "topicId": "x"}
    no_op = b'{"type":"NoOpRecord","version":0}'
    assert [r.offset for r in journal_rows([(5, 1, 0, (topic_record, no_op))]).rows] == [5]
    with_no_ops = journal_rows([(5, 1, 0, (topic_record, no_op))], no_ops=True)
    assert [r.offset for r in with_no_ops.rows] == [6, 5]


def config(resource_type: int, resource: str, name: str, value: str | None) -> bytes:
    return json.dumps(
        {"type": "ConfigRecord", "version": 0, "resourceType": resource_type,
         "resourceName": resource, "name": name, "value": value}
    ).encode()  # fmt: skip


def test_journal_redacts_config_values_describe_configs_would_hide() -> None:
    records = (
        config(4, "1", "listener.name.internal.ssl.keystore.password", "hunter2"),
        config(4, "", "ssl.key.password", "hunter3"),  # a PASSWORD key
        config(4, "1", "some.plugin.secret", "hunter4"),  # unknown to the broker's definitions
        config(4, "1", "log.retention.ms", "1000"),
        config(2, "orders", "retention.ms", "2000"),
        config(4, "1", "ssl.key.password", None),  # a deletion has nothing to hide
        json.dumps(
            {"type": "DelegationTokenRecord", "owner": "User:alice", "renewers": ["User:bob"],
             "requester": "User:alice", "tokenId": "t1", "expirationTimestamp": 5}
        ).encode(),
    )  # fmt: skip
    rows = journal_rows([(0, 1, 0, records)]).rows
    fields = [json.loads(r.fields) for r in reversed(rows)]
    assert [f.get("value") for f in fields[:6]] == [
        "(redacted)",
        "(redacted)",
        "(redacted)",
        "1000",
        "2000",
        None,
    ]
    assert "hunter" not in "".join(r.fields for r in rows)
    assert fields[6]["owner"] == fields[6]["requester"] == fields[6]["renewers"] == "(redacted)"
    assert fields[6]["expirationTimestamp"] == 5


def test_journal_drops_records_of_topics_the_caller_may_not_describe() -> None:
    records = (
        b'{"type":"TopicRecord","name":"secret","topicId":"s"}',
        b'{"type":"PartitionRecord","partitionId":0,"topicId":"s"}',
        config(2, "secret", "retention.ms", "1"),
        b'{"type":"TopicRecord","name":"public","topicId":"p"}',
        b'{"type":"PartitionChangeRecord","partitionId":0,"topicId":"p","leader":2}',
        b'{"type":"PartitionRecord","partitionId":0,"topicId":"gone"}',  # a deleted topic
        b'{"type":"FeatureLevelRecord","name":"metadata.version","featureLevel":21}',
    )
    listing = journal_rows(
        [(0, 1, 0, records)],
        visible={"public"}.__contains__,
        topic_names={"s": "secret", "p": "public"},
    )
    assert [r.offset for r in listing.rows] == [6, 4, 3]
    assert listing.hidden == 4
    assert "secret" not in "".join(r.fields for r in listing.rows)


def test_journal_walks_from_the_newest_and_stops_at_the_rows_shown() -> None:
    # The older batch is not JSON: a walk that parsed the whole window would fail on it.
    shown = b'{"type":"TopicRecord","name":"t","topicId":"x"}'
    listing = journal_rows([(0, 1, 0, (b"not json",)), (1, 1, 0, (shown,) * 3)], limit=3)
    assert [r.offset for r in listing.rows] == [3, 2, 1]


def test_a_negative_offset_is_unknown_and_marked() -> None:
    # librdkafka answers -1001 (invalid) when the partition's leader is down.
    row = GroupOffsetRow("t", 0, 5, -1001, "m", "/h", "c")
    assert row.lag is None and not row.known
    assert total_lag([row, GroupOffsetRow("t", 1, 5, 8)]) == 3
    html = console_html.group("Stable", [row])
    assert "-1,001" not in html and "-1001" not in html
    assert '<span class="bad" title="an offset is unknown">-</span>' in html


def test_group_ids_a_browser_would_resolve_go_as_a_query() -> None:
    assert console_html.group_href(".") == "/console/groups?group=."
    assert console_html.group_href("..") == "/console/groups?group=.."
    assert console_html.group_href("a.b") == "/console/groups/a.b"
    html = console_html.groups([GroupRow("..", "Empty", 0, None)], 2, 3)
    assert 'href="/console/groups?group=.."' in html
    assert 'href="/console/groups?page=3"' in html and 'href="/console/groups?page=1"' in html


def test_the_visible_topics_are_kept_per_caller_and_images() -> None:
    cache = VisibleTopicsCache()
    asked: list[str] = []

    def ask(names: Iterable[str]) -> set[str]:
        asked.append("x")
        return {n for n in names if n != "b"}

    first = image(topic("a", partition((1,), (1,), 1)), topic("b", partition((1,), (1,), 1)))
    assert cache.of(first, ("User:alice", "h"), ask) == {"a"}
    assert cache.of(attrs.evolve(first, offset=99), ("User:alice", "h"), ask) == {"a"}
    assert len(asked) == 1
    cache.of(first, ("User:bob", "h"), ask)  # another caller
    cache.of(attrs.evolve(first, acls=attrs.evolve(AclsImage.EMPTY)), ("User:alice", "h"), ask)
    assert len(asked) == 3


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
