"""``pykraft metadata-quorum``: kafka-metadata-quorum.sh — describe the controller quorum, add and
remove controllers (KIP-595, KIP-853).

    pykraft metadata-quorum --bootstrap-server 127.0.0.1:9092 [--command-config FILE] \\
        describe (--status | --replication [--human-readable])
        add-controller              (--command-config is the new controller's properties)
        remove-controller --controller-id ID --controller-directory-id DIR

Subcommands, options and output follow Kafka's ``MetadataQuorumCommand``
(tools/.../MetadataQuorumCommand.java): ``describe --status`` prints the leader, its epoch, the
high watermark, the largest follower lag (records and ms) and the voters and observers as JSON;
``describe --replication [--human-readable]`` one row per replica (``ToolsUtils.prettyPrintTable``:
padded columns, each followed by a tab; a header line first, the leader first, then the voters,
then the observers). ``add-controller`` reads the new controller's
``node.id``, its ``listeners`` (the ``CONTROLLER`` listener named by
``controller.listener.names`` and the ``RAFT`` listener) and the ``directory.id`` of
``metadata.log.dir/meta.properties`` (written by the controller at its first start; Kafka's
``kafka-storage format``), then sends AddRaftVoter through a broker. A bad argument or a failed
call prints one line on stderr and exits 1.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from pykraft.admin_client import KafkaAdminClient
from pykraft.admin_errors import AdminError
from pykraft.admin_quorum import NewVoterListener, QuorumCalls, QuorumInfo, ReplicaDescription
from pykraft.admin_tool import run_admin_tool
from pykraft.metadata.records import kafka_string_to_uuid, uuid_to_kafka_string
from pykraft.properties import ConfigError, Properties
from pykraft.quorum.config import ControllerConfigError, parse_listener
from pykraft.storage.system_clock import SystemClock

REPLICATION_HEADERS = (
    "NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
    "LastCaughtUpTimestamp", "Status",
)  # fmt: skip
# AddRaftVoter's TimeoutMs: how long the leader waits for the new voter to catch up.
ADD_CONTROLLER_TIMEOUT_MS = 20_000
ZERO_UUID = uuid.UUID(int=0)
META_PROPERTIES = "meta.properties"

Out = Callable[[str], None]


class MetadataQuorumCommandError(Exception):
    """Printed on stderr; exit status 1."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = "This tool describes kraft metadata quorum status."
    parser.add_argument("--bootstrap-server", metavar="host:port", help="REQUIRED")
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="admin client properties; for add-controller, the new controller's properties",
    )
    commands = parser.add_subparsers(dest="quorum_command", metavar="COMMAND")
    describe = commands.add_parser("describe", help="Describe the metadata quorum info")
    which = describe.add_mutually_exclusive_group()
    which.add_argument("--status", action="store_true", help="the quorum's status")
    which.add_argument("--replication", action="store_true", help="the replicas' progress")
    describe.add_argument(
        "--human-readable",
        action="store_true",
        help="with --replication: the timestamps as how long ago (ms)",
    )
    commands.add_parser("add-controller", help="Add a controller to the KRaft controller cluster")
    remove = commands.add_parser(
        "remove-controller", help="Remove a controller from the KRaft controller cluster"
    )
    remove.add_argument("--controller-id", type=int, help="The id of the controller to remove.")
    remove.add_argument(
        "--controller-directory-id", help="The directory ID of the controller to remove."
    )


def run(args: argparse.Namespace, out: Out = print) -> int:
    async def body(admin: KafkaAdminClient, _: None) -> int:
        try:
            await execute(args, admin.quorum, out)
        except (AdminError, MetadataQuorumCommandError) as error:
            print(error, file=sys.stderr)
            return 1
        return 0

    return run_admin_tool(args, check_args, (MetadataQuorumCommandError,), SystemClock(), body)


def check_args(args: argparse.Namespace) -> None:
    if not args.bootstrap_server:
        raise MetadataQuorumCommandError("argument --bootstrap-server is required")
    command = args.quorum_command
    if command is None:
        raise MetadataQuorumCommandError("a command is required: describe, add-controller, ...")
    if command == "describe" and not (args.status or args.replication):
        raise MetadataQuorumCommandError("One of --status or --replication must be specified")
    if command == "add-controller" and args.command_config is None:
        raise MetadataQuorumCommandError(
            "You must supply the configuration file of the "
            "controller you are adding when using add-controller."
        )
    if command == "remove-controller" and (
        args.controller_id is None or not args.controller_directory_id
    ):
        raise MetadataQuorumCommandError(
            "remove-controller needs --controller-id and --controller-directory-id"
        )


async def execute(args: argparse.Namespace, calls: QuorumCalls, out: Out) -> None:
    command = args.quorum_command
    if command == "describe":
        info = await calls.describe_metadata_quorum()
        if args.status:
            cluster_id = await calls.cluster_id()
            for line in status_lines(info, cluster_id):
                out(line)
        else:
            now_ms = SystemClock().wall_clock_ms() if args.human_readable else None
            for line in replication_lines(info, now_ms):
                out(line)
    elif command == "add-controller":
        voter_id, directory_id, listeners = new_controller(args.command_config)
        await calls.add_raft_voter(
            cluster_id=None,
            timeout_ms=ADD_CONTROLLER_TIMEOUT_MS,
            voter_id=voter_id,
            directory_id=directory_id,
            listeners=listeners,
        )
        endpoints = ", ".join(f"{item.name}://{item.host}:{item.port}" for item in listeners)
        out(
            f"Added controller {voter_id} with directory id "
            f"{uuid_to_kafka_string(directory_id.bytes)} and endpoints: {endpoints}"
        )
    else:
        directory_id = parse_directory_id(args.controller_directory_id)
        await calls.remove_raft_voter(
            cluster_id=None, voter_id=args.controller_id, directory_id=directory_id
        )
        out(
            f"Removed KRaft controller {args.controller_id} with directory id "
            f"{args.controller_directory_id}"
        )


def parse_directory_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(bytes=kafka_string_to_uuid(text.strip()))
    except ValueError as error:
        raise MetadataQuorumCommandError(f"--controller-directory-id: {error}") from None


def new_controller(path: Path) -> tuple[int, uuid.UUID, tuple[NewVoterListener, ...]]:
    """The new controller's id, directory id and listeners, from its properties file."""
    try:
        props = Properties.load(path)
        node_id = props.get_int("node.id")
        listener_name = props.get_str("controller.listener.names", "CONTROLLER").split(",")[0]
        items = props.get_list("listeners")
        http = parse_listener(items, listener_name.strip())
        raft = parse_listener(items, "RAFT")
        log_dir = Path(props.values.get("metadata.log.dir") or props.get_list("log.dirs")[0])
    except (ConfigError, ControllerConfigError, IndexError) as error:
        raise MetadataQuorumCommandError(f"{path}: {error}") from None
    directory_id = read_directory_id(log_dir)
    listeners = (
        NewVoterListener(name="CONTROLLER", host=http.host, port=http.port),
        NewVoterListener(name="RAFT", host=raft.host, port=raft.port),
    )
    return node_id, directory_id, listeners


def read_directory_id(log_dir: Path) -> uuid.UUID:
    path = log_dir / META_PROPERTIES
    try:
        props = Properties.load(path)
        return uuid.UUID(bytes=kafka_string_to_uuid(props.get_str("directory.id")))
    except (ConfigError, ValueError) as error:
        raise MetadataQuorumCommandError(
            f"{path}: no directory.id ({error}); start the new controller once first"
        ) from None


def _directory(replica: ReplicaDescription) -> str:
    return uuid_to_kafka_string(replica.directory_id.bytes)


def status_lines(info: QuorumInfo, cluster_id: str | None) -> list[str]:
    """``describe --status``: MetadataQuorumCommand.handleDescribeStatus. The largest lag is the
    leader's log end minus the smallest voter log end (the leader's own row counts, so 0 when
    all are caught up); its time the leader's last caught-up time minus that voter's (0 when the
    leader is that voter, -1 when either time is unknown)."""
    leader = _leader(info)
    slowest = min(info.voters, key=lambda voter: voter.log_end_offset)
    if slowest is leader:
        lag_time_ms = 0
    elif leader.last_caught_up_timestamp >= 0 and slowest.last_caught_up_timestamp >= 0:
        lag_time_ms = leader.last_caught_up_timestamp - slowest.last_caught_up_timestamp
    else:
        lag_time_ms = -1
    return [
        f"ClusterId:              {cluster_id or ''}",
        f"LeaderId:               {info.leader_id}",
        f"LeaderEpoch:            {info.leader_epoch}",
        f"HighWatermark:          {info.high_watermark}",
        f"MaxFollowerLag:         {leader.log_end_offset - slowest.log_end_offset}",
        f"MaxFollowerLagTimeMs:   {lag_time_ms}",
        f"CurrentVoters:          {_replica_states(info, info.voters)}",
        f"CurrentObservers:       {_replica_states(info, info.observers)}",
    ]


def _leader(info: QuorumInfo) -> ReplicaDescription:
    leader = next((v for v in info.voters if v.replica_id == info.leader_id), None)
    if leader is None:  # Kafka's tool fails on Optional.get() here; say why instead
        raise MetadataQuorumCommandError(
            f"The quorum has no leader among its voters (LeaderId {info.leader_id}); "
            "try again once one is elected."
        )
    return leader


def _replica_states(info: QuorumInfo, replicas: Sequence[ReplicaDescription]) -> str:
    """MetadataQuorumCommand's ``Node.toString`` per replica: a zero directory id and an empty
    endpoint list are left out (``{"id": 1}``), endpoints are ``NAME://host:port``."""
    nodes = []
    for replica in replicas:
        text = f'{{"id": {replica.replica_id}'
        if replica.directory_id != ZERO_UUID:
            text += f', "directoryId": "{_directory(replica)}"'
        endpoints = info.nodes.get(replica.replica_id, ())
        if endpoints:
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints) + "]"
        nodes.append(text + "}")
    return "[" + ", ".join(nodes) + "]"


def replication_lines(info: QuorumInfo, now_ms: int | None = None) -> list[str]:
    """``describe --replication``: the leader, then the other voters, then the observers; Lag
    is the leader's log end minus the replica's (handleDescribeReplication). With ``now_ms``
    (``--human-readable``) a known timestamp prints as ``N ms ago``."""
    leader = _leader(info)

    def when(timestamp_ms: int, what: str) -> str:
        if timestamp_ms < 0 or now_ms is None:
            return str(timestamp_ms)
        return f"{relative_time_ms(timestamp_ms, now_ms, what)} ms ago"

    def row(replica: ReplicaDescription, status: str) -> list[str]:
        return [
            str(value)
            for value in (
                replica.replica_id,
                _directory(replica),
                replica.log_end_offset,
                leader.log_end_offset - replica.log_end_offset,
                when(replica.last_fetch_timestamp, "last fetch"),
                when(replica.last_caught_up_timestamp, "last caught up"),
                status,
            )
        ]

    followers = [v for v in info.voters if v.replica_id != info.leader_id]
    rows = [
        row(leader, "Leader"),
        *(row(v, "Follower") for v in followers),
        *(row(o, "Observer") for o in info.observers),
    ]
    return pretty_table(REPLICATION_HEADERS, rows)


def relative_time_ms(timestamp_ms: int, now_ms: int, what: str) -> int:
    """MetadataQuorumCommand.relativeTimeMs: a time after the epoch and not in the future."""
    if not 0 < timestamp_ms <= now_ms:
        raise MetadataQuorumCommandError(
            "Error while computing relative time, possible drift in system clock.\n"
            f"Current timestamp is {now_ms}, {what} timestamp is {timestamp_ms}"
        )
    return now_ms - timestamp_ms


def pretty_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Kafka's ``ToolsUtils.prettyPrintTable``: each cell padded to its column's widest value
    (header included) and followed by a tab, the last one too."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    return [
        "".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True))
        for row in [headers, *rows]
    ]
