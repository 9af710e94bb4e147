"""``broker.new_logs``: a delta's new topics get their logs off the event loop before it is
published; a delta that only moves leaders of held topics builds no image for it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pykraft.broker.new_logs import create_new_logs
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import PartitionChangeRecord, TopicRecord
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    OTHER,
    PETS_ID,
    Cluster,
    partition_record,
    replay,
)


def create(cluster: Cluster, delta: MetadataDelta) -> int:
    return asyncio.run(
        create_new_logs(
            delta,
            broker_id=LOCAL,
            replica_manager=cluster.replica_manager,
            log_manager=cluster.log_manager,
            now_ms=0,
        )
    )


def test_new_topics_get_their_logs_first_and_held_topics_build_no_image(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    try:
        cluster.start(
            TopicRecord(name="pets", topic_id=PETS_ID),
            partition_record(PETS_ID, 0, (LOCAL, OTHER), leader=LOCAL),
        )
        birds = replay(
            cluster.image,
            [
                TopicRecord(name="birds", topic_id=BIRDS_ID),
                partition_record(BIRDS_ID, 0, (OTHER, LOCAL), leader=OTHER),
            ],
        )
        assert create(cluster, birds) == 1
        assert any(tp.topic == "birds" for tp in cluster.log_manager.logs)

        moved = replay(
            cluster.image,
            [PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER)],
        )
        applied: list[int] = []
        real_apply = moved.apply

        def counting_apply(*args: Any, **kwargs: Any) -> MetadataImage:
            applied.append(1)
            return real_apply(*args, **kwargs)

        moved.apply = counting_apply  # type: ignore[method-assign]
        assert create(cluster, moved) == 0
        assert applied == []  # pets is held: nothing to create, no image built
    finally:
        cluster.close()
