"""Moving replicas between this broker's log dirs (KIP-113) — the asyncio shell.

``alter_replica_log_dir`` is Kafka's ``ReplicaManager.alterReplicaLogDirs`` for one partition:
it asks the pure ``replica.alter_log_dir.decide_alter_log_dir`` what to do, then drops an
earlier move's future log and/or creates the new one (``LogManager.create_future_log``).

``LogDirMover`` is Kafka's ``ReplicaAlterLogDirsManager`` and its one
``ReplicaAlterLogDirsThread``: every future log whose partition this broker hosts is filled from
the partition's current log (``storage.log_dir_copier.copy_step``), a bounded step at a time
with the event loop free between steps; a caught-up one is swapped in within the same step
(``LogManager.replace_current_with_future_log``) and handed to the ``Partition``, so produce and
fetch go to the moved log from the next request on — the partition serves throughout, as leader
or follower. Future logs found at start-up resume once their partition is hosted again.

KRaft (KIP-858): Kafka 3.9 then sends ``AssignReplicasToDirs`` so the partition record's
``directories`` name the new dir. pykraft's metadata has no replica-to-dir assignment
(``quorum.managers.directories``): heartbeats name the replicas on an offline dir from
``LogManager.log_dir_of``, which the swap updates, so the controller needs no message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.protocol.errors import Errors
from pykraft.replica.alter_log_dir import HostedState, ReplicaDirs, decide_alter_log_dir
from pykraft.storage.log_dir_copier import COPY_STEP_MAX_BYTES, CopyStep, copy_step
from pykraft.storage.log_manager import KafkaStorageError
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# How long the mover sleeps when no future log has anything to copy.
MOVER_IDLE_S = 0.05


def alter_replica_log_dir(
    replica_manager: ReplicaManager, tp: TopicPartition, destination: str, now_ms: int
) -> Errors:
    """One partition of AlterReplicaLogDirs (Kafka ``ReplicaManager.alterReplicaLogDirs``)."""
    log_manager = replica_manager.log_manager
    future = log_manager.future_logs.get(tp)
    current_dir = log_manager.log_dir_of(tp)
    if tp in log_manager.offline_partitions:
        hosted = HostedState.OFFLINE
    elif replica_manager.get_partition(tp) is not None:
        hosted = HostedState.ONLINE
    else:
        hosted = HostedState.NONE
    replica = ReplicaDirs(
        hosted,
        _absolute(current_dir) if log_manager.get_log(tp) is not None else None,
        _absolute(future.log_dir) if future is not None else None,
    )
    decision = decide_alter_log_dir(
        tp,
        destination,
        frozenset(_absolute(d) for d in log_manager.log_dirs),
        frozenset(_absolute(d) for d in log_manager.offline_dirs),
        replica,
    )
    if decision.preferred_dir is not None and log_manager.get_log(tp) is None:
        # Kafka's maybeUpdatePreferredLogDir: a replica created here later starts there.
        log_manager.preferred_log_dirs[tp] = next(
            d for d in log_manager.log_dirs if _absolute(d) == decision.preferred_dir
        )
    if decision.cancel_future:
        log_manager.future_logs.drop(tp)
        logger.info("%s: the move to %s is cancelled", tp, replica.future_dir)
    if decision.create_future:
        target = next(d for d in log_manager.log_dirs if _absolute(d) == destination)
        try:
            log_manager.create_future_log(tp, target, now_ms)
        except KafkaStorageError as error:
            logger.warning("%s: cannot move to %s: %s", tp, destination, error)
            return Errors.KAFKA_STORAGE_ERROR
        logger.info("%s: moving from %s to %s", tp, current_dir, destination)
    return decision.error


def _absolute(path: Path | None) -> str:
    assert path is not None
    return str(path.absolute())


class LogDirMover:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        wall_clock_ms: Callable[[], int],
        step_max_bytes: int = COPY_STEP_MAX_BYTES,
    ) -> None:
        self.replica_manager = replica_manager
        self.wall_clock_ms = wall_clock_ms
        self.step_max_bytes = step_max_bytes

    def step_all(self) -> bool:
        """One copy step for every hosted partition with a future log; True if any copied."""
        log_manager = self.replica_manager.log_manager
        progressed = False
        for tp, future in sorted(log_manager.future_logs.logs.items()):
            partition = self.replica_manager.get_partition(tp)
            current = log_manager.get_log(tp)
            if partition is None or current is None or partition.log is not current:
                continue  # not hosted (yet): Kafka adds the fetcher when it becomes leader/follower
            now_ms = self.wall_clock_ms()
            try:
                step = copy_step(current, future.log, now_ms, self.step_max_bytes)
                if step is CopyStep.CAUGHT_UP:
                    partition.log = log_manager.replace_current_with_future_log(tp, now_ms)
            except OSError as error:  # Kafka: an IOException fails the log dir it happened on
                log_manager.handle_log_dir_failure(future.log_dir, f"moving {tp}: {error}")
                continue
            progressed = True
        return progressed

    async def run(self) -> None:
        """Copy until cancelled; the loop yields between steps so requests keep flowing."""
        while True:
            if self.step_all():
                await asyncio.sleep(0)
            else:
                await asyncio.sleep(MOVER_IDLE_S)
