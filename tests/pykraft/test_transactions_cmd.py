"""``pykraft transactions`` without a cluster: Kafka's ``TransactionsCommandTest`` cases (each
test names the one it mirrors) over an admin double that answers as Kafka's mocked ``Admin`` does
and records what it was asked; plus the table format and the failures' messages.

The double stands in for the network boundary only (``admin_client.KafkaAdminClient``, which
``tests/clients/test_transactions_tool.py`` runs against real brokers); every decision — the
arguments, the abort spec, find-hanging's filters, the output — is the shipped code's.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Collection, Sequence
from typing import Any

import pytest

from pykraft import cli, transactions_cmd
from pykraft.admin_codec import (
    AbortTransactionSpec,
    PartitionMetadata,
    PartitionProducers,
    ProducerState,
    TopicMetadata,
    TransactionDescription,
    TransactionListing,
)
from pykraft.admin_errors import AdminError
from pykraft.hanging_transactions import HEADERS as FIND_HANGING_HEADERS
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.transactions_cmd import (
    DESCRIBE_HEADERS,
    LIST_HEADERS,
    PRODUCERS_HEADERS,
    TransactionsCommandError,
    check_args,
)

NOW_MS = 1_700_000_000_000
MINUTE_MS = 60_000
FOO5 = TopicPartition("foo", 5)


class FakeAdmin:
    """Answers set by the test; every call recorded as (name, arguments)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.topics: dict[str, TopicMetadata] = {}
        self.producers: dict[TopicPartition, PartitionProducers] = {}
        self.listings: dict[int, tuple[TransactionListing, ...]] = {}
        self.descriptions: dict[str, TransactionDescription | None] = {}
        self.failure: AdminError | None = None

    def _call(self, name: str, arguments: object) -> None:
        self.calls.append((name, arguments))
        if self.failure is not None:
            raise self.failure

    async def list_topics(self) -> list[str]:
        self._call("list_topics", None)
        return sorted(self.topics)

    async def describe_topics(self, topics: Sequence[str]) -> dict[str, TopicMetadata]:
        self._call("describe_topics", list(topics))
        return {name: self.topics[name] for name in topics}

    async def describe_producers(
        self, partitions: Collection[TopicPartition], broker_id: int | None = None
    ) -> dict[TopicPartition, PartitionProducers]:
        self._call("describe_producers", (list(partitions), broker_id))
        return {tp: self.producers[tp] for tp in partitions if tp in self.producers}

    async def describe_transactions(
        self, transactional_ids: Collection[str]
    ) -> dict[str, TransactionDescription | None]:
        self._call("describe_transactions", sorted(transactional_ids))
        return {tid: self.descriptions.get(tid) for tid in transactional_ids}

    async def list_transactions(
        self, producer_ids: Collection[int] = ()
    ) -> dict[int, tuple[TransactionListing, ...]]:
        self._call("list_transactions", sorted(producer_ids))
        return self.listings

    async def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        self._call("abort_transaction", spec)

    def asked(self, name: str) -> list[Any]:
        return [arguments for called, arguments in self.calls if called == name]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    transactions_cmd.add_arguments(parser)
    return parser.parse_args(["--bootstrap-server", "localhost:9092", *argv])


class Outcome:
    def __init__(self, status: int, out: list[str], err: list[str]) -> None:
        self.status, self.out, self.err = status, out, err

    def table(self) -> list[list[str]]:
        """Each line split on white space, as Kafka's test reads the output."""
        return [line.split() for line in self.out]


def execute(admin: FakeAdmin, *argv: str, now_ms: int = NOW_MS) -> Outcome:
    args = parse(*argv)
    check_args(args)
    out: list[str] = []
    err: list[str] = []
    status = asyncio.run(
        transactions_cmd.execute(args, admin, out.append, err.append, lambda: now_ms)
    )
    return Outcome(status, out, err)


def assert_command_failure(*argv: str) -> str:
    """Kafka's ``assertCommandFailure``: exit 1, and (ours) the reason on stderr."""
    with pytest.raises(TransactionsCommandError) as refused:
        check_args(parse(*argv))
    return str(refused.value)


def producer(
    producer_id: int,
    epoch: int,
    last_sequence: int,
    last_timestamp: int,
    coordinator_epoch: int | None,
    start_offset: int | None,
) -> ProducerState:
    return ProducerState(
        producer_id, epoch, last_sequence, last_timestamp, coordinator_epoch, start_offset
    )


def description(
    producer_id: int, epoch: int, start_ms: int | None, *partitions: TopicPartition
) -> TransactionDescription:
    return TransactionDescription(1, "Ongoing", producer_id, epoch, 60_000, start_ms, partitions)


def two_partition_topic() -> TopicMetadata:
    """foo-0 on brokers 0 and 1, foo-1 on brokers 1 and 5 (the find-hanging lookup tests)."""
    return TopicMetadata(
        "foo",
        Errors.NONE,
        False,
        (
            PartitionMetadata(0, Errors.NONE, 0, (0, 1)),
            PartitionMetadata(1, Errors.NONE, 1, (1, 5)),
        ),
    )


# ---------------------------------------------------------------------------- describe-producers


def test_describe_producers_topic_required() -> None:  # testDescribeProducersTopicRequired
    assert assert_command_failure("describe-producers", "--partition", "0") == (
        "argument --topic is required"
    )


def test_describe_producers_partition_required() -> None:  # testDescribeProducersPartitionRequired
    assert assert_command_failure("describe-producers", "--topic", "foo") == (
        "argument --partition is required"
    )


@pytest.mark.parametrize("broker_id", [None, 5])
def test_describe_producers(broker_id: int | None) -> None:
    # testDescribeProducersLeader, testDescribeProducersSpecificReplica
    admin = FakeAdmin()
    admin.producers[FOO5] = PartitionProducers(
        Errors.NONE,
        None,
        (
            producer(12345, 15, 1300, 1599509565, 20, 990),
            producer(98765, 30, 2300, 1599509599, None, None),
        ),
    )
    extra = [] if broker_id is None else ["--broker-id", str(broker_id)]
    outcome = execute(admin, "describe-producers", "--topic", "foo", "--partition", "5", *extra)
    assert outcome.status == 0
    assert admin.asked("describe_producers") == [([FOO5], broker_id)]
    table = outcome.table()
    assert table[0] == list(PRODUCERS_HEADERS)
    assert sorted(table[1:]) == [
        ["12345", "15", "20", "1300", "1599509565", "990"],
        ["98765", "30", "-1", "2300", "1599509599", "None"],
    ]


def test_describe_producers_failure_names_the_partition_and_the_replica() -> None:
    admin = FakeAdmin()
    admin.failure = AdminError("TOPIC_AUTHORIZATION_FAILED", Errors.TOPIC_AUTHORIZATION_FAILED)
    outcome = execute(
        admin, "describe-producers", "--topic", "foo", "--partition", "5", "--broker-id", "2"
    )
    assert (outcome.status, outcome.out) == (1, [])
    assert outcome.err == [
        "Failed to describe producers for partition foo-5 on broker 2: TOPIC_AUTHORIZATION_FAILED"
    ]


# ---------------------------------------------------------------------------- list, describe


def test_list_transactions() -> None:  # testListTransactions
    admin = FakeAdmin()
    admin.listings = {
        0: (
            TransactionListing("foo", 12345, "Ongoing"),
            TransactionListing("bar", 98765, "PrepareAbort"),
        ),
        1: (TransactionListing("baz", 13579, "CompleteCommit"),),
    }
    outcome = execute(admin, "list")
    assert outcome.status == 0
    assert admin.asked("list_transactions") == [[]]  # no producer id filter
    table = outcome.table()
    assert table[0] == list(LIST_HEADERS)
    assert sorted(table[1:]) == [
        ["bar", "0", "98765", "PrepareAbort"],
        ["baz", "1", "13579", "CompleteCommit"],
        ["foo", "0", "12345", "Ongoing"],
    ]


def test_list_with_no_transactions_prints_the_header_alone() -> None:
    outcome = execute(FakeAdmin(), "list")
    assert (outcome.status, outcome.table()) == (0, [list(LIST_HEADERS)])


def test_describe_transactions_transactional_id_required() -> None:
    # testDescribeTransactionsTransactionalIdRequired
    assert assert_command_failure("describe") == "argument --transactional-id is required"


def test_describe_transaction() -> None:  # testDescribeTransaction
    admin = FakeAdmin()
    start_ms = NOW_MS - 5000  # Kafka's test sleeps 5 s on its MockTime
    admin.descriptions["foo"] = TransactionDescription(
        5, "Ongoing", 12345, 15, 10000, start_ms, (TopicPartition("bar", 0),)
    )
    outcome = execute(admin, "describe", "--transactional-id", "foo")
    assert outcome.status == 0
    assert outcome.table() == [
        list(DESCRIBE_HEADERS),
        ["5", "foo", "12345", "15", "Ongoing", "10000", str(start_ms), "5000", "bar-0"],
    ]


def test_describe_an_empty_transaction_has_no_start_time_nor_duration() -> None:
    admin = FakeAdmin()
    admin.descriptions["foo"] = TransactionDescription(3, "Empty", 7, 0, 60000, None, ())
    outcome = execute(admin, "describe", "--transactional-id", "foo")
    assert outcome.table()[1] == ["3", "foo", "7", "0", "Empty", "60000", "None", "None"]


def test_describe_an_unknown_transactional_id_fails() -> None:
    outcome = execute(FakeAdmin(), "describe", "--transactional-id", "nope")
    assert (outcome.status, outcome.out) == (1, [])
    assert outcome.err == [
        "Failed to describe transaction state of transactional-id `nope`: "
        "TRANSACTIONAL_ID_NOT_FOUND"
    ]


# ---------------------------------------------------------------------------- abort


def test_abort_start_offset_or_producer_id_required() -> None:
    # testDescribeTransactionsStartOffsetOrProducerIdRequired
    message = assert_command_failure("abort", "--topic", "foo", "--partition", "0")
    assert message.startswith("The transaction to abort must be identified either with")


def test_abort_topic_required() -> None:  # testDescribeTransactionsTopicRequired
    assert_command_failure("abort", "--partition", "0", "--start-offset", "9990")


def test_abort_partition_required() -> None:  # testDescribeTransactionsPartitionRequired
    assert_command_failure("abort", "--topic", "foo", "--start-offset", "9990")


def test_abort_producer_epoch_required_with_producer_id() -> None:
    # testDescribeTransactionsProducerEpochRequiredWithProducerId
    assert assert_command_failure(
        "abort", "--topic", "foo", "--partition", "0", "--producer-id", "12345"
    ) == ("Missing required argument --producer-epoch")


def test_abort_coordinator_epoch_required_with_producer_id() -> None:
    # testDescribeTransactionsCoordinatorEpochRequiredWithProducerId
    assert assert_command_failure(
        "abort", "--topic", "foo", "--partition", "0", "--producer-id", "12345",
        "--producer-epoch", "15",
    ) == ("Missing required argument --coordinator-epoch")  # fmt: skip


def test_abort_producer_epoch_must_be_a_short() -> None:
    assert_command_failure(
        "abort", "--topic", "foo", "--partition", "0", "--producer-id", "1",
        "--producer-epoch", "32768", "--coordinator-epoch", "0",
    )  # fmt: skip


def test_new_broker_abort_transaction() -> None:  # testNewBrokerAbortTransaction
    admin = FakeAdmin()
    admin.producers[FOO5] = PartitionProducers(
        Errors.NONE, None, (producer(12345, 15, 1300, 1599509565, 76, 9173),)
    )
    outcome = execute(
        admin, "abort", "--topic", "foo", "--partition", "5", "--start-offset", "9173"
    )
    assert (outcome.status, outcome.err) == (0, [])
    assert admin.asked("describe_producers") == [([FOO5], None)]  # on the leader
    assert admin.asked("abort_transaction") == [AbortTransactionSpec(FOO5, 12345, 15, 76)]


def test_abort_by_start_offset_picks_the_producer_whose_transaction_starts_there() -> None:
    admin = FakeAdmin()
    admin.producers[FOO5] = PartitionProducers(
        Errors.NONE,
        None,
        (
            producer(1, 0, 3, NOW_MS, 4, 100),
            producer(2, 7, 3, NOW_MS, None, 200),  # hung before its first marker
            producer(3, 0, 3, NOW_MS, 4, None),
        ),
    )
    execute(admin, "abort", "--topic", "foo", "--partition", "5", "--start-offset", "200")
    assert admin.asked("abort_transaction") == [AbortTransactionSpec(FOO5, 2, 7, 0)]


def test_abort_by_start_offset_without_such_a_transaction_fails_and_writes_nothing() -> None:
    admin = FakeAdmin()
    admin.producers[FOO5] = PartitionProducers(
        Errors.NONE, None, (producer(1, 0, 3, NOW_MS, 4, 100),)
    )
    outcome = execute(admin, "abort", "--topic", "foo", "--partition", "5", "--start-offset", "99")
    assert outcome.status == 1
    assert outcome.err == ["Could not find any open transactions starting at offset 99 on "
                           "partition foo-5"]  # fmt: skip
    assert admin.asked("abort_transaction") == []


@pytest.mark.parametrize(("given", "sent"), [(29, 29), (-1, 0)])
def test_old_broker_abort_transaction_with_unknown_coordinator_epoch(given: int, sent: int) -> None:
    # testOldBrokerAbortTransactionWithUnknownCoordinatorEpoch
    admin = FakeAdmin()
    outcome = execute(
        admin, "abort", "--topic", "foo", "--partition", "5", "--producer-id", "12345",
        "--producer-epoch", "15", "--coordinator-epoch", str(given),
    )  # fmt: skip
    assert outcome.status == 0
    assert admin.asked("describe_producers") == []
    assert admin.asked("abort_transaction") == [AbortTransactionSpec(FOO5, 12345, 15, sent)]


def test_a_refused_abort_fails_with_the_spec_and_the_cause() -> None:
    admin = FakeAdmin()

    async def refuse(spec: AbortTransactionSpec) -> None:
        raise AdminError("cluster authorization error", Errors.CLUSTER_AUTHORIZATION_FAILED)

    admin.abort_transaction = refuse  # type: ignore[method-assign]
    outcome = execute(
        admin, "abort", "--topic", "foo", "--partition", "5", "--producer-id", "1",
        "--producer-epoch", "2", "--coordinator-epoch", "3",
    )  # fmt: skip
    assert outcome.status == 1
    assert outcome.err == [
        "Failed to abort transaction AbortTransactionSpec(topicPartition=foo-5, producerId=1, "
        "producerEpoch=2, coordinatorEpoch=3): cluster authorization error"
    ]


# ---------------------------------------------------------------------------- find-hanging


def test_find_hanging_requires_either_broker_id_or_topic() -> None:
    # testFindHangingRequiresEitherBrokerIdOrTopic
    assert "requires either --topic or --broker-id" in assert_command_failure("find-hanging")


def test_find_hanging_requires_topic_if_partition_is_specified() -> None:
    # testFindHangingRequiresTopicIfPartitionIsSpecified
    assert assert_command_failure("find-hanging", "--broker-id", "0", "--partition", "5") == (
        "The --partition argument requires --topic to be provided"
    )


def assert_no_hanging_transactions(outcome: Outcome) -> None:
    assert (outcome.status, outcome.table()) == (0, [list(FIND_HANGING_HEADERS)])


def test_find_hanging_lookup_topic_partitions_for_broker() -> None:
    # testFindHangingLookupTopicPartitionsForBroker: every topic, internal ones too; only
    # the partitions with a replica on broker 5, asked of broker 5
    admin = FakeAdmin()
    admin.topics["foo"] = two_partition_topic()
    outcome = execute(admin, "find-hanging", "--broker-id", "5")
    assert_no_hanging_transactions(outcome)
    assert admin.asked("list_topics") == [None]
    assert admin.asked("describe_topics") == [["foo"]]
    assert admin.asked("describe_producers") == [([TopicPartition("foo", 1)], 5)]


def test_find_hanging_lookup_topic_and_broker_id() -> None:
    # testFindHangingLookupTopicAndBrokerId
    admin = FakeAdmin()
    admin.topics["foo"] = two_partition_topic()
    outcome = execute(admin, "find-hanging", "--broker-id", "5", "--topic", "foo")
    assert_no_hanging_transactions(outcome)
    assert admin.asked("list_topics") == []
    assert admin.asked("describe_producers") == [([TopicPartition("foo", 1)], 5)]


def test_find_hanging_lookup_topic_partitions_for_topic() -> None:
    # testFindHangingLookupTopicPartitionsForTopic
    admin = FakeAdmin()
    admin.topics["foo"] = two_partition_topic()
    outcome = execute(admin, "find-hanging", "--topic", "foo")
    assert_no_hanging_transactions(outcome)
    assert admin.asked("describe_producers") == [
        ([TopicPartition("foo", 0), TopicPartition("foo", 1)], None)
    ]


def expect_open_transaction(admin: FakeAdmin, last_timestamp: int) -> None:
    """Producer 132, epoch 5, coordinator epoch 19, its transaction open at 29384 on foo-5."""
    admin.producers[FOO5] = PartitionProducers(
        Errors.NONE, None, (producer(132, 5, 500, last_timestamp, 19, 29384),)
    )


def find_hanging_foo5(admin: FakeAdmin) -> Outcome:
    return execute(admin, "find-hanging", "--topic", "foo", "--partition", "5")


def assert_hanging_transaction(outcome: Outcome, last_timestamp: int) -> None:
    minutes = (NOW_MS - last_timestamp) // MINUTE_MS
    assert outcome.status == 0
    assert outcome.table() == [
        list(FIND_HANGING_HEADERS),
        ["foo", "5", "132", "5", "19", "29384", str(last_timestamp), str(minutes)],
    ]


def test_find_hanging_specified_topic_partition() -> None:
    # testFindHangingSpecifiedTopicPartition: open, but younger than the 15 min default
    admin = FakeAdmin()
    expect_open_transaction(admin, NOW_MS)
    outcome = find_hanging_foo5(admin)
    assert_no_hanging_transactions(outcome)
    assert admin.asked("describe_topics") == []
    assert admin.asked("list_transactions") == []


def test_find_hanging_no_mapped_transactional_id() -> None:
    # testFindHangingNoMappedTransactionalId
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 60 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    admin.listings = {1: ()}
    outcome = find_hanging_foo5(admin)
    assert_hanging_transaction(outcome, last_timestamp)
    assert admin.asked("list_transactions") == [[132]]


def test_find_hanging_with_no_transaction_description() -> None:
    # testFindHangingWithNoTransactionDescription: the coordinator does not know the id
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 60 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    admin.listings = {1: (TransactionListing("bar", 132, "Ongoing"),)}
    outcome = find_hanging_foo5(admin)
    assert_hanging_transaction(outcome, last_timestamp)
    assert admin.asked("describe_transactions") == [["bar"]]


def test_find_hanging_does_not_filter_by_transaction_in_progress_with_different_partitions() -> (
    None
):
    # testFindHangingDoesNotFilterByTransactionInProgressWithDifferentPartitions
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 60 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    admin.listings = {1: (TransactionListing("bar", 132, "Ongoing"),)}
    admin.descriptions["bar"] = description(132, 5, NOW_MS, TopicPartition("foo", 10))
    assert_hanging_transaction(find_hanging_foo5(admin), last_timestamp)


def test_find_hanging_filter_by_transaction_in_progress_with_same_partition() -> None:
    # testFindHangingFilterByTransactionInProgressWithSamePartition
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 60 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    admin.listings = {1: (TransactionListing("bar", 132, "Ongoing"),)}
    admin.descriptions["bar"] = description(132, 5, last_timestamp, FOO5)
    assert_no_hanging_transactions(find_hanging_foo5(admin))


def test_find_hanging_max_transaction_timeout_bounds_the_age_of_a_candidate() -> None:
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 20 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    older_than_30 = execute(
        admin,
        "find-hanging",
        "--topic",
        "foo",
        "--partition",
        "5",
        "--max-transaction-timeout",
        "30",
    )
    assert_no_hanging_transactions(older_than_30)
    assert_hanging_transaction(find_hanging_foo5(admin), last_timestamp)  # 20 > 15


def test_find_hanging_ignores_listings_of_producers_not_asked_for() -> None:
    """``lookupTransactionalIds`` drops a listing whose producer id was not requested."""
    admin = FakeAdmin()
    last_timestamp = NOW_MS - 60 * MINUTE_MS
    expect_open_transaction(admin, last_timestamp)
    admin.listings = {1: (TransactionListing("other", 7, "Ongoing"),)}
    admin.descriptions["other"] = description(7, 0, NOW_MS, FOO5)
    assert_hanging_transaction(find_hanging_foo5(admin), last_timestamp)
    assert admin.asked("describe_transactions") == [[]]


def test_find_hanging_asks_for_producers_in_batches_of_500() -> None:
    admin = FakeAdmin()
    admin.topics["big"] = TopicMetadata(
        "big",
        Errors.NONE,
        False,
        tuple(PartitionMetadata(index, Errors.NONE, 1, (1,)) for index in range(1201)),
    )
    assert_no_hanging_transactions(execute(admin, "find-hanging", "--topic", "big"))
    asked = admin.asked("describe_producers")
    assert [len(partitions) for partitions, _ in asked] == [500, 500, 201]


def test_find_hanging_failure_to_describe_the_topic_fails_the_command() -> None:
    admin = FakeAdmin()
    admin.failure = AdminError("topic foo: UNKNOWN_TOPIC_OR_PARTITION")
    outcome = execute(admin, "find-hanging", "--topic", "foo")
    assert (outcome.status, outcome.out) == (1, [])
    assert outcome.err == ["Failed to describe 1 topics: topic foo: UNKNOWN_TOPIC_OR_PARTITION"]


# ---------------------------------------------------------------------------- the command line


def test_bootstrap_server_and_a_command_are_required() -> None:
    parser = argparse.ArgumentParser()
    transactions_cmd.add_arguments(parser)
    with pytest.raises(TransactionsCommandError, match="--bootstrap-server is required"):
        check_args(parser.parse_args(["list"]))
    with pytest.raises(TransactionsCommandError, match="a command is required"):
        check_args(parser.parse_args(["--bootstrap-server", "localhost:9092"]))


def test_pykraft_transactions_is_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    args = cli.build_parser().parse_args(
        ["transactions", "--bootstrap-server", "h:1", "describe-producers", "--topic", "t"]
    )
    assert args._module is transactions_cmd
    assert cli.main(["transactions", "--bootstrap-server", "h:1", "find-hanging"]) == 1
    assert "requires either --topic or --broker-id" in capsys.readouterr().err


@pytest.mark.parametrize("servers", ["localhost", "h:port", ":9092", "h:0", ","])
def test_a_bad_bootstrap_server_fails_before_connecting(
    servers: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["transactions", "--bootstrap-server", servers, "list"]) == 1
    assert "bootstrap.servers" in capsys.readouterr().err
