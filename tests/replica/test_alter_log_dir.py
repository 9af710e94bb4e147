"""The per-partition decision of AlterReplicaLogDirs (Kafka ``ReplicaManager
.alterReplicaLogDirs``); cases mirror Kafka's ``AlterReplicaLogDirsRequestTest``
(``testAlterReplicaLogDirsRequest``, ``testAlterReplicaLogDirsRequestErrorCode``) and
``ReplicaManagerTest.testFutureReplicaDirChanged`` style checks."""

from __future__ import annotations

from pykraft.protocol.errors import Errors
from pykraft.replica.alter_log_dir import (
    MAX_DIR_NAME_BYTES,
    AlterLogDirDecision,
    HostedState,
    ReplicaDirs,
    decide_alter_log_dir,
    future_dir_name_length,
)
from pykraft.storage.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
DIRS = frozenset({"/d1", "/d2", "/d3"})
NONE = frozenset[str]()
ON_D1 = ReplicaDirs(HostedState.ONLINE, "/d1", None)
NOT_HOSTED = ReplicaDirs(HostedState.NONE, None, None)


def check(
    destination: str,
    replica: ReplicaDirs,
    expected: AlterLogDirDecision,
    offline: frozenset[str] = NONE,
    tp: TopicPartition = TP,
) -> None:
    assert decide_alter_log_dir(tp, destination, DIRS, offline, replica) == expected


def test_a_move_to_another_online_dir_creates_the_future_log() -> None:
    check("/d2", ON_D1, AlterLogDirDecision(Errors.NONE, create_future=True, preferred_dir="/d2"))


def test_the_current_dir_is_a_no_op_success() -> None:
    check("/d1", ON_D1, AlterLogDirDecision(Errors.NONE, preferred_dir="/d1"))


def test_the_dir_of_the_move_under_way_changes_nothing() -> None:
    moving = ReplicaDirs(HostedState.ONLINE, "/d1", "/d2")
    check("/d2", moving, AlterLogDirDecision(Errors.NONE, preferred_dir="/d2"))


def test_another_destination_cancels_the_move_under_way_and_starts_a_new_one() -> None:
    moving = ReplicaDirs(HostedState.ONLINE, "/d1", "/d2")
    check(
        "/d3",
        moving,
        AlterLogDirDecision(
            Errors.NONE, cancel_future=True, create_future=True, preferred_dir="/d3"
        ),
    )


def test_moving_back_to_the_current_dir_cancels_the_move() -> None:
    moving = ReplicaDirs(HostedState.ONLINE, "/d1", "/d2")
    check("/d1", moving, AlterLogDirDecision(Errors.NONE, cancel_future=True, preferred_dir="/d1"))


def test_an_unknown_dir_is_log_dir_not_found() -> None:
    check("/elsewhere", ON_D1, AlterLogDirDecision(Errors.LOG_DIR_NOT_FOUND))
    check("d2", ON_D1, AlterLogDirDecision(Errors.LOG_DIR_NOT_FOUND))  # not absolute


def test_an_offline_destination_is_a_storage_error() -> None:
    check("/d2", ON_D1, AlterLogDirDecision(Errors.KAFKA_STORAGE_ERROR), offline=frozenset({"/d2"}))


def test_an_offline_partition_is_a_storage_error() -> None:
    offline = ReplicaDirs(HostedState.OFFLINE, "/d1", None)
    check("/d2", offline, AlterLogDirDecision(Errors.KAFKA_STORAGE_ERROR))


def test_any_offline_dir_refuses_a_new_future_log() -> None:
    # LogManager.getOrCreateLog(isNew = false): no future log while a dir is offline.
    check(
        "/d2",
        ON_D1,
        AlterLogDirDecision(Errors.KAFKA_STORAGE_ERROR, preferred_dir="/d2"),
        offline=frozenset({"/d3"}),
    )
    # ... but the no-op stays a success.
    check(
        "/d1",
        ON_D1,
        AlterLogDirDecision(Errors.NONE, preferred_dir="/d1"),
        offline=frozenset({"/d3"}),
    )


def test_a_replica_not_hosted_is_replica_not_available_and_remembers_the_dir() -> None:
    check("/d2", NOT_HOSTED, AlterLogDirDecision(Errors.REPLICA_NOT_AVAILABLE, preferred_dir="/d2"))
    no_log = ReplicaDirs(HostedState.ONLINE, None, None)
    check("/d2", no_log, AlterLogDirDecision(Errors.REPLICA_NOT_AVAILABLE, preferred_dir="/d2"))


def test_the_dir_checks_come_before_the_replica_checks() -> None:
    check("/nope", NOT_HOSTED, AlterLogDirDecision(Errors.LOG_DIR_NOT_FOUND))
    offline = ReplicaDirs(HostedState.OFFLINE, "/d1", None)
    check("/nope", offline, AlterLogDirDecision(Errors.LOG_DIR_NOT_FOUND))


def test_a_topic_name_too_long_for_the_future_dir_is_invalid_topic() -> None:
    # KAFKA-4893: name + "-0." + 32 hex + "-future" must fit in 255 bytes.
    fits = TopicPartition("x" * (MAX_DIR_NAME_BYTES - 3 - 32 - 7), 0)
    too_long = TopicPartition("x" * (MAX_DIR_NAME_BYTES - 3 - 32 - 7 + 1), 0)
    assert future_dir_name_length(fits) == MAX_DIR_NAME_BYTES
    check(
        "/d2",
        ON_D1,
        AlterLogDirDecision(Errors.NONE, create_future=True, preferred_dir="/d2"),
        tp=fits,
    )
    check("/d2", ON_D1, AlterLogDirDecision(Errors.INVALID_TOPIC_EXCEPTION), tp=too_long)
    check("/nope", ON_D1, AlterLogDirDecision(Errors.INVALID_TOPIC_EXCEPTION), tp=too_long)
