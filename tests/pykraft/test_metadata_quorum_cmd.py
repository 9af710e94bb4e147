"""``pykraft metadata-quorum`` (kafka-metadata-quorum.sh): its output as Kafka's
MetadataQuorumCommandTest / MetadataQuorumCommandUnitTest check it (the --status fields, the
--replication rows: leader first, then followers, then observers), the add-controller inputs
read from the new controller's files, and the codecs of the three calls."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest

from pykraft.admin_errors import AdminError
from pykraft.admin_quorum import (
    NewVoterListener,
    QuorumInfo,
    ReplicaDescription,
    decode_describe_quorum,
    decode_voter_change,
    encode_add_raft_voter,
    encode_remove_raft_voter,
)
from pykraft.broker.handlers.describe_quorum import encode_describe_quorum_response
from pykraft.controller_cmd import ensure_meta_properties
from pykraft.metadata.api.quorum import DescribeQuorumResponse, Listener, QuorumNode, ReplicaState
from pykraft.metadata.records import uuid_to_kafka_string
from pykraft.metadata_quorum_cmd import (
    MetadataQuorumCommandError,
    check_args,
    new_controller,
    parse_directory_id,
    read_directory_id,
    replication_lines,
    status_lines,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.raft_voter_messages import (
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    RemoveRaftVoterRequest,
)

ZERO = uuid.UUID(int=0)
DIR_4 = uuid.UUID("85b7f3c2-8a2e-4b8d-9e6a-4f1c2d3b4a59")


def replica(node_id: int, end: int, directory: uuid.UUID = ZERO, caught_up: int = 5) -> Any:
    return ReplicaDescription(
        replica_id=node_id,
        directory_id=directory,
        log_end_offset=end,
        last_fetch_timestamp=caught_up,
        last_caught_up_timestamp=caught_up,
    )


INFO = QuorumInfo(
    leader_id=2,
    leader_epoch=7,
    high_watermark=120,
    voters=(replica(1, 118, caught_up=3), replica(2, 120, caught_up=9), replica(4, 120, DIR_4)),
    observers=(replica(10, 119, caught_up=-1),),
    nodes={2: ("CONTROLLER://h2:19092", "RAFT://h2:9092")},
)


def test_status_prints_kafkas_fields() -> None:
    lines = status_lines(INFO, "MkU3OEVBNTcwNTJENDM2Qk")
    assert lines[:6] == [
        "ClusterId:              MkU3OEVBNTcwNTJENDM2Qk",
        "LeaderId:               2",
        "LeaderEpoch:            7",
        "HighWatermark:          120",
        "MaxFollowerLag:         2",
        "MaxFollowerLagTimeMs:   6",
    ]
    # MetadataQuorumCommand's Node.toString: no zero directory id, no empty endpoint list.
    assert lines[6] == (
        'CurrentVoters:          [{"id": 1}, {"id": 2, "endpoints": '
        '["CONTROLLER://h2:19092", "RAFT://h2:9092"]}, {"id": 4, "directoryId": '
        f'"{uuid_to_kafka_string(DIR_4.bytes)}"}}]'
    )
    assert lines[7] == 'CurrentObservers:       [{"id": 10}]'


def test_status_lag_time_is_zero_when_the_leader_is_slowest_and_unknown_without_times() -> None:
    leader_behind = attrs.evolve(INFO, voters=(replica(1, 120), replica(2, 118)))
    assert status_lines(leader_behind, None)[4:6] == [
        "MaxFollowerLag:         0",
        "MaxFollowerLagTimeMs:   0",
    ]
    never_caught_up = attrs.evolve(INFO, voters=(replica(1, 100, caught_up=-1), replica(2, 120)))
    assert status_lines(never_caught_up, None)[4:6] == [
        "MaxFollowerLag:         20",
        "MaxFollowerLagTimeMs:   -1",
    ]
    no_leader = attrs.evolve(INFO, leader_id=-1)
    with pytest.raises(MetadataQuorumCommandError, match="no leader"):
        status_lines(no_leader, None)


def test_replication_is_kafkas_pretty_printed_table() -> None:
    # ToolsUtils.prettyPrintTable: every cell padded to its column's width and followed by a tab;
    # Lag is the leader's log end minus the replica's.
    zero = "AAAAAAAAAAAAAAAAAAAAAA"
    d4 = uuid_to_kafka_string(DIR_4.bytes)
    assert replication_lines(INFO) == [
        "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\t"
        "LastCaughtUpTimestamp\tStatus  \t",
        f"2     \t{zero}\t120         \t0  \t9                 \t9                    \tLeader  \t",
        f"1     \t{zero}\t118         \t2  \t3                 \t3                    \tFollower\t",
        f"4     \t{d4}\t120         \t0  \t5                 \t5                    \tFollower\t",
        f"10    \t{zero}\t119         \t1  \t-1                \t-1                   \tObserver\t",
    ]


def test_human_readable_replication_prints_how_long_ago() -> None:
    # handleDescribeReplication --human-readable: "N ms ago"; an unknown time stays -1.
    rows = [line.split("\t") for line in replication_lines(INFO, now_ms=1_000)]
    assert [(row[0].strip(), row[4].strip(), row[5].strip()) for row in rows[1:]] == [
        ("2", "991 ms ago", "991 ms ago"),
        ("1", "997 ms ago", "997 ms ago"),
        ("4", "995 ms ago", "995 ms ago"),
        ("10", "-1", "-1"),
    ]
    with pytest.raises(MetadataQuorumCommandError) as drift:
        replication_lines(INFO, now_ms=4)
    assert str(drift.value) == (
        "Error while computing relative time, possible drift in system clock.\n"
        "Current timestamp is 4, last fetch timestamp is 9"
    )


def test_describe_quorum_decodes_what_the_broker_encodes() -> None:
    answer = DescribeQuorumResponse(
        leader_id=1,
        leader_epoch=3,
        high_watermark=10,
        voters=(
            ReplicaState(
                replica_id=1, log_end_offset=10, replica_directory_id="AAAAAAAAAAAAAAAAAAAAAA"
            ),
            ReplicaState(replica_id=4, replica_directory_id=uuid_to_kafka_string(DIR_4.bytes)),
        ),
        observers=(),
        nodes=(QuorumNode(node_id=1, listeners=(Listener(name="RAFT", host="h", port=1),)),),
    )
    body = encode_describe_quorum_response(2, answer).encode(version=2)
    info = decode_describe_quorum(bytes(body), 2)
    assert isinstance(info, QuorumInfo)
    assert [(v.replica_id, v.directory_id, v.log_end_offset) for v in info.voters] == [
        (1, ZERO, 10),
        (4, DIR_4, -1),
    ]
    assert info.nodes == {1: ("RAFT://h:1",)}


def test_voter_change_codecs() -> None:
    listeners = (NewVoterListener(name="RAFT", host="h", port=9096),)
    body = encode_add_raft_voter(
        0, cluster_id=None, timeout_ms=5, voter_id=4, directory_id=DIR_4, listeners=listeners
    )
    request = AddRaftVoterRequest.decode(body, version=0)
    assert (request.voter_id, request.voter_directory_id, request.timeout_ms) == (4, DIR_4, 5)
    assert [(i.name, i.host, i.port) for i in request.listeners] == [("RAFT", "h", 9096)]
    removal = RemoveRaftVoterRequest.decode(
        encode_remove_raft_voter(0, cluster_id="c", voter_id=3, directory_id=DIR_4), version=0
    )
    assert (removal.cluster_id, removal.voter_id) == ("c", 3)
    refused = AddRaftVoterResponse(
        version=0, throttle_time_ms=0, error_code=Errors.DUPLICATE_VOTER.code, error_message="dup"
    )
    with pytest.raises(AdminError, match="DUPLICATE_VOTER: dup"):
        decode_voter_change(AddRaftVoterResponse, refused.encode(version=0), 0)
    fine = AddRaftVoterResponse(version=0, throttle_time_ms=0, error_code=0, error_message=None)
    decode_voter_change(AddRaftVoterResponse, fine.encode(version=0), 0)


def test_add_controller_reads_the_new_controllers_files(tmp_path: Path) -> None:
    log_dir = tmp_path / "controller-4"
    directory_id = ensure_meta_properties(log_dir, 4)
    assert ensure_meta_properties(log_dir, 4) == directory_id  # made once, kept
    config = tmp_path / "controller-4.properties"
    config.write_text(
        "node.id=4\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093\n"
        "listeners=CONTROLLER://127.0.0.1:19096,RAFT://127.0.0.1:9096\n"
        f"metadata.log.dir={log_dir}\n"
    )
    node_id, directory, listeners = new_controller(config)
    assert node_id == 4
    assert uuid_to_kafka_string(directory.bytes) == directory_id
    assert listeners == (
        NewVoterListener(name="CONTROLLER", host="127.0.0.1", port=19096),
        NewVoterListener(name="RAFT", host="127.0.0.1", port=9096),
    )
    with pytest.raises(MetadataQuorumCommandError, match="start the new controller"):
        read_directory_id(tmp_path / "never-started")
    config.write_text(f"node.id=4\nlisteners=CONTROLLER://h:1\nmetadata.log.dir={log_dir}\n")
    with pytest.raises(MetadataQuorumCommandError, match="RAFT"):
        new_controller(config)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"bootstrap_server": None}, "--bootstrap-server is required"),
        ({"quorum_command": None}, "a command is required"),
        ({"quorum_command": "describe"}, "One of --status or --replication"),
        ({"quorum_command": "add-controller"}, "configuration file of the controller"),
        ({"quorum_command": "remove-controller"}, "--controller-id"),
    ],
)
def test_bad_arguments(arguments: dict[str, Any], message: str) -> None:
    values: dict[str, Any] = {
        "bootstrap_server": "h:1",
        "quorum_command": "describe",
        "status": False,
        "replication": False,
        "command_config": None,
        "controller_id": None,
        "controller_directory_id": None,
    }
    values.update(arguments)
    with pytest.raises(MetadataQuorumCommandError, match=message):
        check_args(argparse.Namespace(**values))


def test_a_directory_id_is_kafkas_text_form() -> None:
    assert parse_directory_id(uuid_to_kafka_string(DIR_4.bytes)) == DIR_4
    with pytest.raises(MetadataQuorumCommandError):
        parse_directory_id("not-a-uuid")
