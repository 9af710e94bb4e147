"""A streaming query from ``pykraft-kafka`` into Spark's file sink, shared by the live test and
the driver process it kills: ``python -m tests.export.kafka_stream_driver BOOTSTRAP TOPIC OUT
CHECKPOINT MASTER [KEY=VALUE ...]`` runs the query until killed, its tasks on ``MASTER`` with
the ``KEY=VALUE`` pairs as Spark conf (pykraft shipped to the executors, as for any cluster)."""

from __future__ import annotations

import sys
from typing import Any

MAX_OFFSETS_PER_TRIGGER = 50


def start_stream(
    spark: Any,
    bootstrap_servers: str,
    topic: str,
    out: str,
    checkpoint: str,
    *,
    available_now: bool = False,
) -> Any:
    """The query; ``available_now``: Trigger.AvailableNow (read what is there, then stop)."""
    stream = (
        spark.readStream.format("pykraft-kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(MAX_OFFSETS_PER_TRIGGER))
        .load()
        .selectExpr("partition", "offset", "value")
    )
    writer = (
        stream.writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime="0 seconds").start()


def main(argv: list[str]) -> int:
    from pykraft.export.session import build_session

    bootstrap_servers, topic, out, checkpoint, master, *conf = argv
    pairs = dict(pair.split("=", 1) for pair in conf)
    spark = build_session(master, "kafka-stream-driver", extra_conf=pairs)
    start_stream(spark, bootstrap_servers, topic, out, checkpoint).awaitTermination()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
