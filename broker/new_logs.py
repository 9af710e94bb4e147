"""Creating a metadata delta's new logs off the broker's event loop.

The first consumer with a ``group.id`` makes the cluster create ``__consumer_offsets`` (50
partitions); each broker then created its share of the logs while applying the delta, on the
event loop: directories, segment and index files, 2-3 ms of file-system work each on a busy
disk, so an ApiVersions round trip waited 0.3-0.6 s (issue 18). Kafka applies metadata on its
own publisher thread, never on a request thread.

Here the metadata loader awaits ``create_new_logs`` before it publishes a delta
(``MetadataLoader.before_publish``): the log dirs are chosen on the loop, the files are made in a
worker thread while the loop keeps answering, and the logs are registered on the loop; then the
delta is published as before, finding its logs there. Nothing is reordered: the image, the
replica layer and the coordinators see the delta only at that publication, after the logs exist,
exactly as when the publication created them itself. Only logs of topics the broker holds no log
of are made here (``HostedPartitions.new_logs_wanted``); anything else, and any log whose creation
failed here, is left to the publication's own ``get_or_create_log`` (which takes a failing dir
offline as before).
"""

from __future__ import annotations

import asyncio
import logging

from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.local_changes import local_changes
from pykraft.storage.log_manager import LogManager, NewLog
from pykraft.storage.partition_log import PartitionLog

logger = logging.getLogger(__name__)


async def create_new_logs(
    delta: MetadataDelta,
    *,
    broker_id: int,
    replica_manager: ReplicaManager,
    log_manager: LogManager,
    now_ms: int,
) -> int:
    """Create the new topics' logs ``delta`` places on this broker; returns how many."""
    changes = local_changes(delta, broker_id)
    if not (changes.leaders or changes.followers):
        return 0
    wanted = replica_manager.hosted.new_logs_wanted(changes, delta.apply)
    plan = log_manager.plan_new_logs(wanted)
    if not plan:
        return 0
    opened = await asyncio.to_thread(_open_all, log_manager, plan, now_ms)
    adopted = 0
    for new, log in opened:
        if log is not None and log_manager.adopt_new_log(new, log, now_ms):
            adopted += 1
    return adopted


def _open_all(
    log_manager: LogManager, plan: list[NewLog], now_ms: int
) -> list[tuple[NewLog, PartitionLog | None]]:
    """The file work, in the worker thread; a failure leaves that log to the publication."""
    opened: list[tuple[NewLog, PartitionLog | None]] = []
    for new in plan:
        try:
            opened.append((new, log_manager.open_new_log(new, now_ms)))
        except OSError as error:
            logger.warning("creating %s off the event loop failed: %s", new.tp, error)
            opened.append((new, None))
    return opened
