"""What AlterReplicaLogDirs (KIP-113) does to one partition — a pure decision.

Kafka's ``ReplicaManager.alterReplicaLogDirs`` checks, for each ``(partition, destination)``
in the request, in this order (the first failing check answers):

1. the future directory name ``<topic>-<p>.<32 hex>-future`` must fit in 255 bytes
   (KAFKA-4893) — else INVALID_TOPIC_EXCEPTION;
2. the destination must be one of ``log.dirs`` (``LogManager.isLogDirOnline`` throws
   ``LogDirNotFoundException``: LOG_DIR_NOT_FOUND) and online (KAFKA_STORAGE_ERROR);
3. a hosted partition whose future replica sits in another dir than the destination has that
   future replica dropped (``Partition.futureReplicaDirChanged`` then
   ``removeFutureLocalReplica``: the earlier move is cancelled); an offline partition is
   KAFKA_STORAGE_ERROR;
4. the destination becomes the partition's preferred dir (``maybeUpdatePreferredLogDir``), so a
   replica not hosted yet is created there later — and that replica answers
   REPLICA_NOT_AVAILABLE (Kafka maps its ``NotLeaderOrFollowerException`` to
   REPLICA_NOT_AVAILABLE here "for compatibility");
5. ``Partition.maybeCreateFutureReplica``: nothing when the replica already lives in the
   destination (a no-op success, which also cancelled any move in step 3) or its future replica
   already does; else a future log is created in the destination — which ``LogManager
   .getOrCreateLog(isFuture = true)`` refuses with KAFKA_STORAGE_ERROR while any log dir is
   offline, so that a partition never gets future logs in two dirs.

The shell (the handler over ``LogManager``) does what the returned ``AlterLogDirDecision`` says.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import FUTURE_DIR_SUFFIX, TopicPartition

# Kafka's file-name limit for the future directory (UnifiedLog.logFutureDirName).
MAX_DIR_NAME_BYTES = 255
# A Kafka unique id in a directory name: a uuid without dashes (32 hex characters).
_UNIQUE_ID_CHARS = 32


class HostedState(enum.Enum):
    """Kafka's ``HostedPartition``: ``None``, ``Online`` or ``Offline`` on this broker."""

    NONE = "none"
    ONLINE = "online"
    OFFLINE = "offline"


@dataclass(frozen=True)
class ReplicaDirs:
    """Where one partition's replica lives on this broker, as the shell sees it."""

    hosted: HostedState
    current_dir: str | None  # the current log's dir; None when there is no local log
    future_dir: str | None  # the future log's dir while a move is under way


@dataclass(frozen=True)
class AlterLogDirDecision:
    """What to answer and do for one partition. ``error`` is the partition's answer;
    ``cancel_future`` drops the future log of an earlier move to another dir; ``create_future``
    starts a move into ``preferred_dir``; ``preferred_dir`` is remembered for the partition
    when not None (Kafka's ``preferredLogDirs``)."""

    error: Errors
    cancel_future: bool = False
    create_future: bool = False
    preferred_dir: str | None = None


def future_dir_name_length(topic_partition: TopicPartition) -> int:
    """Bytes in ``<topic>-<p>.<uuid>-future`` (Kafka ``UnifiedLog.logFutureDirName``)."""
    name = topic_partition.dir_name()
    return len(name.encode()) + 1 + _UNIQUE_ID_CHARS + len(FUTURE_DIR_SUFFIX)


def decide_alter_log_dir(
    topic_partition: TopicPartition,
    destination: str,
    log_dirs: frozenset[str],
    offline_dirs: frozenset[str],
    replica: ReplicaDirs,
) -> AlterLogDirDecision:
    """Kafka ``ReplicaManager.alterReplicaLogDirs`` for one partition (see the module doc).
    ``log_dirs`` and ``offline_dirs`` are absolute paths; ``destination`` is compared as given,
    as Kafka compares ``File.getAbsolutePath`` with the request's string."""
    if future_dir_name_length(topic_partition) > MAX_DIR_NAME_BYTES:
        return AlterLogDirDecision(Errors.INVALID_TOPIC_EXCEPTION)
    if destination not in log_dirs:
        return AlterLogDirDecision(Errors.LOG_DIR_NOT_FOUND)
    if destination in offline_dirs:
        return AlterLogDirDecision(Errors.KAFKA_STORAGE_ERROR)
    if replica.hosted is HostedState.OFFLINE:
        return AlterLogDirDecision(Errors.KAFKA_STORAGE_ERROR)
    cancel = (
        replica.hosted is HostedState.ONLINE
        and replica.future_dir is not None
        and replica.future_dir != destination
    )
    if replica.hosted is HostedState.NONE or replica.current_dir is None:
        return AlterLogDirDecision(
            Errors.REPLICA_NOT_AVAILABLE, cancel_future=cancel, preferred_dir=destination
        )
    future_dir = None if cancel else replica.future_dir
    if replica.current_dir == destination or future_dir == destination:
        return AlterLogDirDecision(Errors.NONE, cancel_future=cancel, preferred_dir=destination)
    if offline_dirs:
        return AlterLogDirDecision(
            Errors.KAFKA_STORAGE_ERROR, cancel_future=cancel, preferred_dir=destination
        )
    return AlterLogDirDecision(
        Errors.NONE, cancel_future=cancel, create_future=True, preferred_dir=destination
    )
