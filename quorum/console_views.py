"""The web console's view models (issue 16): metadata image and probe answers in, table rows out.

Pure: no I/O, no clock (``now_ms`` is passed in), no HTML. ``quorum/service_console.py`` is the
aiohttp shell that gathers the inputs, ``quorum/console_html.py`` renders the rows. Each page's
rows come from one function here, so the pages are tested without a server or a browser.

Bounds (STYLE.md §7), so a cluster of 10,000 partitions stays fast: the topic list is one pass
over the image and shows ``TOPICS_PER_PAGE`` topics per page (the totals — partitions,
under-replicated, offline — cover every topic); a topic's page lists at most
``PARTITIONS_PER_PAGE`` partitions per page; the journal shows the last ``JOURNAL_RECORDS``
records of the retained window (``console_journal``).

Kafka's meanings: a partition is under-replicated when its ISR is smaller than its replica set
(``Partition.isUnderReplicated``), offline when it has no leader (leader -1,
``OfflinePartitionsCount``); a group's lag per partition is LOG-END-OFFSET - CURRENT-OFFSET
(``ConsumerGroupCommand``), unknown when either is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from pykraft.metadata.api.admin import QuorumDescription
from pykraft.metadata.image import (
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pykraft.quorum.broker_rates import BrokerRates

TOPICS_PER_PAGE = 100
GROUPS_PER_PAGE = 100
PARTITIONS_PER_PAGE = 500
NO_LEADER = -1


@attrs.frozen
class ControllerRow:
    node_id: int
    role: str  # leader, follower, candidate, observer, voter (a standby's view of the others)
    raft_term: int | None
    # Raft entries behind the leader's commit index; None where this controller cannot know.
    lag: int | None
    url: str | None


@attrs.frozen
class BrokerRow:
    broker_id: int
    broker_epoch: int
    state: str  # Kafka's: RUNNING, FENCED, PENDING_CONTROLLED_SHUTDOWN
    endpoints: str
    rack: str
    leaders: int
    replicas: int
    # Per second between its last two heartbeats (``quorum/broker_rates.py``); None without
    # two recent samples, or on a controller that is not the active one.
    rates: BrokerRates | None = None


@attrs.frozen
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int


@attrs.frozen
class TopicPage:
    rows: tuple[TopicRow, ...]
    page: int
    pages: int
    topics: int
    partitions: int
    under_replicated: int
    offline: int


@attrs.frozen
class PartitionRow:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    under_replicated: bool
    offline: bool
    log_end_offset: int | None = None


@attrs.frozen
class GroupOffsetRow:
    """One row of Kafka's ``kafka-consumer-groups --describe``."""

    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str = "-"
    host: str = "-"
    client_id: str = "-"

    @property
    def lag(self) -> int | None:
        if not self.known:
            return None
        assert self.current_offset is not None and self.log_end_offset is not None
        return max(0, self.log_end_offset - self.current_offset)

    @property
    def known(self) -> bool:
        """Both offsets answered and valid: a negative offset (librdkafka's -1001, "invalid",
        when the leader is down) is unknown, never a lag of 0."""
        return (
            self.current_offset is not None
            and self.log_end_offset is not None
            and self.current_offset >= 0
            and self.log_end_offset >= 0
        )


@attrs.frozen
class GroupRow:
    group: str
    state: str
    members: int
    lag: int | None  # the sum over its partitions; None when no partition's lag is known
    # False: listed but not described before the page's deadline (state from ListGroups).
    known: bool = True


@attrs.frozen
class Member:
    consumer_id: str
    host: str
    client_id: str
    assignment: tuple[tuple[str, int], ...]


def controller_rows(quorum: QuorumDescription) -> tuple[ControllerRow, ...]:
    """The voters as this controller sees them (``GET /v1/quorum``): its own role from Raft, the
    leader's from who it follows, the others ``follower`` (known to the leader) or ``voter``."""
    rows = []
    for voter in quorum.voters:
        if voter.node_id == quorum.node_id:
            role = quorum.state
        elif voter.node_id == quorum.leader_id:
            role = "leader"
        else:
            role = "follower" if quorum.state == "leader" else "voter"
        rows.append(
            ControllerRow(
                node_id=voter.node_id,
                role=role,
                raft_term=quorum.raft_term,
                lag=voter.lag,
                url=voter.url,
            )
        )
    return tuple(sorted(rows, key=lambda row: row.node_id))


def broker_state(fenced: bool, in_controlled_shutdown: bool) -> str:
    """Kafka's ``BrokerRegistration`` states as its admin tools name them."""
    if in_controlled_shutdown:
        return "PENDING_CONTROLLED_SHUTDOWN"
    return "FENCED" if fenced else "RUNNING"


def broker_rows(
    image: MetadataImage, rates: Mapping[int, BrokerRates] | None = None
) -> tuple[BrokerRow, ...]:
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    for topic in image.topics.by_name.values():
        for partition in topic.partitions.values():
            leaders[partition.leader] = leaders.get(partition.leader, 0) + 1
            for replica in partition.replicas:
                replicas[replica] = replicas.get(replica, 0) + 1
    rows = []
    for broker_id, broker in sorted(image.cluster.brokers.items()):
        rows.append(
            BrokerRow(
                broker_id=broker_id,
                broker_epoch=broker.epoch,
                state=broker_state(broker.fenced, broker.in_controlled_shutdown),
                endpoints=", ".join(f"{e.name}://{e.host}:{e.port}" for e in broker.endpoints),
                rack=broker.rack or "-",
                leaders=leaders.get(broker_id, 0),
                replicas=replicas.get(broker_id, 0),
                rates=(rates or {}).get(broker_id),
            )
        )
    return tuple(rows)


def _is_under_replicated(partition: PartitionRegistration) -> bool:
    return len(partition.isr) < len(partition.replicas)


def topic_row(topic: TopicImage) -> TopicRow:
    """One pass over the topic's partitions (the topic list makes one per topic)."""
    replication_factor = under_replicated = offline = 0
    for partition in topic.partitions.values():
        replicas = len(partition.replicas)
        replication_factor = replication_factor or replicas
        if len(partition.isr) < replicas:
            under_replicated += 1
        if partition.leader == NO_LEADER:
            offline += 1
    return TopicRow(
        name=topic.name,
        partitions=len(topic.partitions),
        replication_factor=replication_factor,
        under_replicated=under_replicated,
        offline=offline,
    )


def page_count(items: int, per_page: int) -> int:
    return max(1, -(-items // per_page))


def topic_rows(topics: TopicsImage) -> dict[str, TopicRow]:
    """Every topic's row, by name: one pass over the image. The shell keeps the answer while
    the image's ``TopicsImage`` is the same object (it is immutable; records that touch no
    topic, such as the NoOpRecord every 500 ms, leave it as it is)."""
    return {name: topic_row(topic) for name, topic in topics.by_name.items()}


def topic_page(
    image: MetadataImage,
    visible: Callable[[Iterable[str]], set[str]],
    page: int = 1,
    per_page: int = TOPICS_PER_PAGE,
    rows: Mapping[str, TopicRow] | None = None,
) -> TopicPage:
    """Page ``page`` (from 1; clamped) of the topics ``visible`` lets the caller DESCRIBE, by
    name; the totals count every visible topic. ``rows``: ``topic_rows(image.topics)``, if the
    caller kept it."""
    by_name = topic_rows(image.topics) if rows is None else rows
    shown = [by_name[name] for name in sorted(visible(by_name.keys()))]
    pages = page_count(len(shown), per_page)
    page = min(max(1, page), pages)
    return TopicPage(
        rows=tuple(shown[(page - 1) * per_page : page * per_page]),
        page=page,
        pages=pages,
        topics=len(shown),
        partitions=sum(row.partitions for row in shown),
        under_replicated=sum(row.under_replicated for row in shown),
        offline=sum(row.offline for row in shown),
    )


def partition_rows(
    topic: TopicImage,
    log_end_offsets: Mapping[int, int] | None = None,
    page: int = 1,
    per_page: int = PARTITIONS_PER_PAGE,
) -> tuple[PartitionRow, ...]:
    """Page ``page`` of the topic's partitions (``partition_pages`` counts the pages)."""
    ends = log_end_offsets or {}
    indexes = sorted(topic.partitions.keys())[(page - 1) * per_page : page * per_page]
    return tuple(
        PartitionRow(
            partition=index,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            replicas=tuple(p.replicas),
            isr=tuple(p.isr),
            under_replicated=_is_under_replicated(p),
            offline=p.leader == NO_LEADER,
            log_end_offset=ends.get(index),
        )
        for index in indexes
        for p in (topic.partitions[index],)
    )


def group_offset_rows(
    members: Sequence[Member],
    committed: Mapping[tuple[str, int], int],
    log_end_offsets: Mapping[tuple[str, int], int],
) -> tuple[GroupOffsetRow, ...]:
    """Kafka's ``collectGroupsOffsets`` order: each member's partitions (members with the most
    partitions first), then the committed partitions no member holds."""
    rows = []
    assigned: set[tuple[str, int]] = set()
    for member in sorted(members, key=lambda m: (-len(m.assignment), m.consumer_id)):
        assigned.update(member.assignment)
        for topic, partition in sorted(member.assignment):
            rows.append(
                GroupOffsetRow(
                    topic,
                    partition,
                    committed.get((topic, partition)),
                    log_end_offsets.get((topic, partition)),
                    member.consumer_id,
                    member.host,
                    member.client_id,
                )
            )
    for key in sorted(set(committed) - assigned):
        rows.append(GroupOffsetRow(key[0], key[1], committed[key], log_end_offsets.get(key)))
    return tuple(rows)


def total_lag(rows: Iterable[GroupOffsetRow]) -> int | None:
    lags = [row.lag for row in rows if row.lag is not None]
    return sum(lags) if lags else None
