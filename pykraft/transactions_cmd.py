"""``pykraft transactions``: kafka-transactions.sh — find and abort hanging transactions (KIP-664).

    pykraft transactions --bootstrap-server 127.0.0.1:9092 [--command-config client.properties] \\
        list
        describe --transactional-id ID
        describe-producers --topic T --partition P [--broker-id B]
        abort --topic T --partition P (--start-offset O | --producer-id I --producer-epoch E
                                         --coordinator-epoch C)
        find-hanging (--broker-id B | --topic T [--partition P]) [--max-transaction-timeout MIN]

Subcommands, options, tables and messages are Kafka's ``TransactionsCommand``
(tools/.../TransactionsCommand.java): ``list`` asks every broker (ListTransactions),
``describe`` the id's coordinator (FindCoordinator key type 1, DescribeTransactions),
``describe-producers`` the partition's leader or the named broker (DescribeProducers).
``abort`` writes an ABORT marker for one producer on one partition (WriteTxnMarkers to the
leader, as ``Admin.abortTransaction``; the broker requires CLUSTER_ACTION): with
``--start-offset`` the producer is the one whose open transaction starts there on the leader; a
negative ``--coordinator-epoch`` becomes 0, as Kafka's tool does. ``find-hanging`` is
``pykraft.hanging_transactions``. Tables are tab-separated with a header line. A bad argument, or
a call that fails, prints one line on stderr and exits 1 (Kafka's ``printErrorAndExit``).
Kafka 4.1's ``forceTerminateTransaction`` (KIP-939: ``Admin.fenceProducers``, an InitProducerId
for the id at its coordinator) is not offered yet.
``--command-config`` takes an admin client's properties (``pykraft.admin_config``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pykraft import hanging_transactions as hanging
from pykraft.admin_client import KafkaAdminClient, TransactionsAdmin
from pykraft.admin_codec import (
    AbortTransactionSpec,
    TransactionDescription,
)
from pykraft.admin_errors import AdminError
from pykraft.admin_tool import run_admin_tool
from pykraft.storage.system_clock import SystemClock
from pykraft.storage.topic_partition import TopicPartition

MAX_BATCH_SIZE = 500  # FindHangingTransactionsCommand.MAX_BATCH_SIZE
MAX_TRANSACTION_TIMEOUT_MIN_DEFAULT = 15
MS_PER_MINUTE = 60_000
LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = (
    "CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
    "TopicPartitions",
)  # fmt: skip
PRODUCERS_HEADERS = (
    "ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
    "CurrentTransactionStartOffset",
)  # fmt: skip
Out = Callable[[str], None]


class TransactionsCommandError(Exception):
    """Printed on stderr; exit status 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "This tool is used to analyze the transactional state of producers in the cluster. "
        "It can be used to detect and recover from hanging transactions."
    )
    parser.add_argument("--bootstrap-server", metavar="host:port", help="REQUIRED")
    parser.add_argument(
        "--command-config", type=Path, metavar="FILE", help="admin client properties (TLS, SASL)"
    )
    commands = parser.add_subparsers(dest="transactions_command", metavar="COMMAND")
    commands.add_parser("list", help="list transactions")
    describe = commands.add_parser(
        "describe", help="describe the state of an active transactional-id"
    )
    describe.add_argument("--transactional-id", help="transactional id")
    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic partition"
    )
    producers.add_argument("--broker-id", type=int, help="describe the replica on this broker")
    _add_partition_arguments(producers)
    abort = commands.add_parser(
        "abort", help="abort a hanging transaction (requires administrative privileges)"
    )
    _add_partition_arguments(abort)
    abort.add_argument("--start-offset", type=int, help="start offset of the transaction")
    abort.add_argument("--producer-id", type=int, help="producer id")
    abort.add_argument("--producer-epoch", type=int, help="producer epoch")
    abort.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    find = commands.add_parser("find-hanging", help="find hanging transactions")
    find.add_argument("--broker-id", type=int, help="broker id to search for hanging transactions")
    find.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=MAX_TRANSACTION_TIMEOUT_MIN_DEFAULT,
        metavar="MINUTES",
        help="maximum transaction timeout in minutes to limit the scope of the search",
    )
    find.add_argument("--topic", help="topic name to limit search to")
    find.add_argument("--partition", type=int, help="partition number")


def _add_partition_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", help="topic name")
    parser.add_argument("--partition", type=int, help="partition number")


def run(args: argparse.Namespace, out: Out = print) -> int:
    clock = SystemClock()

    async def body(admin: KafkaAdminClient, _: None) -> int:
        return await execute(args, admin, out, _stderr, clock.wall_clock_ms)

    return run_admin_tool(args, check_args, (TransactionsCommandError,), clock, body)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def check_args(args: argparse.Namespace) -> None:
    """What argparse4j's ``required(true)`` and each command's first checks refuse."""
    command = args.transactions_command
    if not args.bootstrap_server:
        raise TransactionsCommandError("argument --bootstrap-server is required")
    if command is None:
        raise TransactionsCommandError(
            "a command is required: list, describe, describe-producers, abort, find-hanging"
        )
    if command == "describe" and args.transactional_id is None:
        raise TransactionsCommandError("argument --transactional-id is required")
    if command in ("describe-producers", "abort"):
        for name in ("topic", "partition"):
            if getattr(args, name) is None:
                raise TransactionsCommandError(f"argument --{name} is required")
    if command == "abort":
        _check_abort_args(args)
    if command == "find-hanging":
        if args.topic is None and args.broker_id is None:
            raise TransactionsCommandError(
                "The `find-hanging` command requires either --topic or --broker-id to limit "
                "the scope of the search"
            )
        if args.partition is not None and args.topic is None:
            raise TransactionsCommandError(
                "The --partition argument requires --topic to be provided"
            )


def _check_abort_args(args: argparse.Namespace) -> None:
    if args.start_offset is None and args.producer_id is None:
        raise TransactionsCommandError(
            "The transaction to abort must be identified either with --start-offset (for "
            "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
            "--coordinator-epoch (for older brokers)"
        )
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise TransactionsCommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise TransactionsCommandError("Missing required argument --coordinator-epoch")
        if not -(2**15) <= args.producer_epoch < 2**15:
            raise TransactionsCommandError(
                f"--producer-epoch {args.producer_epoch} is not a short (int16)"
            )


async def execute(
    args: argparse.Namespace,
    admin: TransactionsAdmin,
    out: Out,
    err: Out,
    wall_clock_ms: Callable[[], int],
) -> int:
    """Run the (checked) command; 0, or 1 after one line on ``err`` when a call failed."""
    commands = {
        "list": _list,
        "describe": _describe,
        "describe-producers": _describe_producers,
        "abort": _abort,
        "find-hanging": _find_hanging,
    }
    try:
        await commands[args.transactions_command](args, admin, out, wall_clock_ms)
    except TransactionsCommandError as error:
        err(str(error))
        return 1
    return 0


def _failed(message: str, cause: AdminError) -> TransactionsCommandError:
    """``printErrorAndExit(message, cause)``: the message, then the cause's."""
    return TransactionsCommandError(f"{message}: {cause}")


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[str]], out: Out) -> None:
    for line in hanging.table_lines(headers, rows):
        out(line)


# ---------------------------------------------------------------------------- list, describe


async def _list(
    args: argparse.Namespace, admin: TransactionsAdmin, out: Out, now: Callable[[], int]
) -> None:
    try:
        by_broker = await admin.list_transactions()
    except AdminError as error:
        raise _failed("Failed to list transactions", error) from None
    rows = [
        [listing.transactional_id, str(broker_id), str(listing.producer_id), listing.state]
        for broker_id, listings in sorted(by_broker.items())
        for listing in listings
    ]
    _print_table(LIST_HEADERS, rows, out)


async def _describe(
    args: argparse.Namespace, admin: TransactionsAdmin, out: Out, now: Callable[[], int]
) -> None:
    transactional_id: str = args.transactional_id
    failure = f"Failed to describe transaction state of transactional-id `{transactional_id}`"
    try:
        description = (await admin.describe_transactions([transactional_id])).get(transactional_id)
    except AdminError as error:
        raise _failed(failure, error) from None
    if description is None:
        raise TransactionsCommandError(f"{failure}: TRANSACTIONAL_ID_NOT_FOUND")
    start_ms = description.transaction_start_time_ms
    row = [
        str(description.coordinator_id),
        transactional_id,
        str(description.producer_id),
        str(description.producer_epoch),
        description.state,
        str(description.transaction_timeout_ms),
        "None" if start_ms is None else str(start_ms),
        "None" if start_ms is None else str(now() - start_ms),
        ",".join(str(tp) for tp in description.topic_partitions),
    ]
    _print_table(DESCRIBE_HEADERS, [row], out)


# ---------------------------------------------------------------------------- producers, abort


async def _describe_producers(
    args: argparse.Namespace, admin: TransactionsAdmin, out: Out, now: Callable[[], int]
) -> None:
    tp = TopicPartition(args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    try:
        result = (await admin.describe_producers([tp], args.broker_id))[tp]
    except AdminError as error:
        raise _failed(
            f"Failed to describe producers for partition {tp} on {where}", error
        ) from None
    rows = [
        [
            str(state.producer_id),
            str(state.producer_epoch),
            str(-1 if state.coordinator_epoch is None else state.coordinator_epoch),
            str(state.last_sequence),
            str(state.last_timestamp),
            _none_or(state.current_transaction_start_offset),
        ]
        for state in result.active_producers
    ]
    _print_table(PRODUCERS_HEADERS, rows, out)


async def _abort(
    args: argparse.Namespace, admin: TransactionsAdmin, out: Out, now: Callable[[], int]
) -> None:
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None:
        # A transaction opened by a new producer id that hung before its first marker shows
        # coordinator epoch -1 in DescribeProducers: 0 is at most any real coordinator epoch.
        spec = AbortTransactionSpec(
            tp, args.producer_id, args.producer_epoch, max(0, args.coordinator_epoch)
        )
    else:
        spec = await abort_spec_at(admin, tp, args.start_offset)
    try:
        await admin.abort_transaction(spec)
    except AdminError as error:
        raise _failed(f"Failed to abort transaction {spec}", error) from None


async def abort_spec_at(
    admin: TransactionsAdmin, tp: TopicPartition, start_offset: int
) -> AbortTransactionSpec:
    """The spec of the open transaction starting at ``start_offset`` on the leader."""
    try:
        result = (await admin.describe_producers([tp]))[tp]
    except AdminError as error:
        raise _failed(f"Failed to validate producer state for partition {tp}", error) from None
    for state in result.active_producers:
        if state.current_transaction_start_offset == start_offset:
            epoch = 0 if state.coordinator_epoch is None else state.coordinator_epoch
            return AbortTransactionSpec(tp, state.producer_id, state.producer_epoch, epoch)
    raise TransactionsCommandError(
        f"Could not find any open transactions starting at offset {start_offset} on partition {tp}"
    )


def _none_or(value: int | None) -> str:
    return "None" if value is None else str(value)


# ---------------------------------------------------------------------------- find-hanging


async def _find_hanging(
    args: argparse.Namespace, admin: TransactionsAdmin, out: Out, now: Callable[[], int]
) -> None:
    partitions = await _partitions_to_search(admin, args.topic, args.partition, args.broker_id)
    max_timeout_ms = args.max_transaction_timeout * MS_PER_MINUTE
    candidates: list[hanging.OpenTransaction] = []
    for batch in hanging.batches(partitions, MAX_BATCH_SIZE):
        where = "their leaders" if args.broker_id is None else f"broker {args.broker_id}"
        try:
            producers = await admin.describe_producers(batch, args.broker_id)
        except AdminError as error:
            message = f"Failed to describe producers for {len(batch)} partitions on {where}"
            raise _failed(message, error) from None
        candidates += hanging.candidate_open_transactions(producers, max_timeout_ms, now())
    found: list[hanging.OpenTransaction] = []
    if candidates:
        producer_ids = sorted({c.producer_state.producer_id for c in candidates})
        transactional_ids = await _transactional_ids(admin, producer_ids)
        descriptions = await _descriptions(admin, sorted(set(transactional_ids.values())))
        found = hanging.hanging_transactions(candidates, transactional_ids, descriptions)
    _print_table(hanging.HEADERS, hanging.hanging_rows(found, now()), out)


async def _partitions_to_search(
    admin: TransactionsAdmin, topic: str | None, partition: int | None, broker_id: int | None
) -> list[TopicPartition]:
    if topic is not None and partition is not None:
        return [TopicPartition(topic, partition)]
    if topic is not None:
        topics = [topic]
    else:
        try:
            topics = await admin.list_topics()
        except AdminError as error:
            raise _failed("Failed to list topics", error) from None
    partitions: list[TopicPartition] = []
    for batch in hanging.batches(topics, MAX_BATCH_SIZE):
        try:
            described = await admin.describe_topics(list(batch))
        except AdminError as error:
            raise _failed(f"Failed to describe {len(batch)} topics", error) from None
        partitions += hanging.partitions_to_search(described, broker_id)
    return partitions


async def _transactional_ids(admin: TransactionsAdmin, producer_ids: list[int]) -> dict[int, str]:
    try:
        by_broker = await admin.list_transactions(producer_ids)
    except AdminError as error:
        message = f"Failed to list transactions for {len(producer_ids)} producers"
        raise _failed(message, error) from None
    listings = [(t.producer_id, t.transactional_id) for ts in by_broker.values() for t in ts]
    return hanging.transactional_ids_of(listings, producer_ids)


async def _descriptions(
    admin: TransactionsAdmin, transactional_ids: list[str]
) -> dict[str, TransactionDescription | None]:
    try:
        return await admin.describe_transactions(transactional_ids)
    except AdminError as error:
        message = f"Failed to describe {len(transactional_ids)} transactions"
        raise _failed(message, error) from None
