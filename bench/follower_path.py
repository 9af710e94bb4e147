"""The follower's fetch path on its own: decode a leader's Fetch response, append it to the logs.

    .venv/bin/python bench/follower_path.py          # 3 partitions x 16 batches of 64 KiB
    .venv/bin/python bench/follower_path.py --quick    # 30 rounds: a smoke run
    .venv/bin/python bench/follower_path.py --partitions 50 --batches 2

Why: issue 18 found the follower side (decoding fetch responses with kafka-python's generated
decoder, then the segment append) about a third of a broker's busy time under acks=all RF=3.
This measures that path without sockets or a cluster: a realistic Fetch response (v16, topic
ids; ``replica.fetch.max.bytes`` 1 MiB per partition filled with 64 KiB batches of 1 KiB
records, as ``bench/replication.py`` produces them) is encoded once by the leader's codec, its
base offsets re-stamped for each round (outside the CRC), and each round the follower decodes it
and appends every partition to a ``PartitionLog`` on disk, with the high watermark and log start
offset it carries (``fetcher.follower_log.append_fetched``).

Both paths run in the same process, taking turns round by round, on their own logs:

* ``old``: kafka-python's generated ``FetchResponse.decode`` (the follower's decoder before
  issue 18) and the append as it was;
* ``new``: ``fetcher.leader_codecs.decode_fetch_response`` (hand-written, zero-copy) and the
  same append.

Each round is timed; the table shows the median decode-only and decode+append times, MB/s of
record bytes, and the speed-up. The machine is shared: compare the two columns of one run, not
runs of different days; the load average is printed next to them. Ends with one JSON line.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kafka.protocol.consumer import FetchResponse as KafkaPythonFetchResponse

from pykraft.fetcher.follower_log import append_fetched
from pykraft.fetcher.leader_codecs import FetchTarget, ReplicaFetch, decode_fetch_response
from pykraft.fetcher.responses import Append
from pykraft.protocol.fetch import (
    FetchableTopicResponse,
    FetchPartition,
    FetchResponse,
    PartitionData,
    encode_fetch_response,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import patch_base_offset
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

KIB, MB = 1024, 1_000_000
RECORD_BYTES = 1 * KIB
VERSION = 16
TOPIC = "bench"
TOPIC_ID = uuid.UUID(int=0x18)
LEADER_EPOCH = 3
# Untimed rounds first: a fresh log's first writes fault in its segment and index pages.
WARM_UP_ROUNDS = 5

Decode = Callable[[memoryview, int, ReplicaFetch], dict[TopicPartition, PartitionData]]


def make_batch(batch_bytes: int, seed: int) -> bytearray:
    """One v2 batch of 1 KiB records filling about ``batch_bytes``, offsets from 0."""
    count = max(1, (batch_bytes - 100) // (RECORD_BYTES + 30))
    records = [
        SimpleRecord(
            value=os.urandom(RECORD_BYTES),
            key=b"key-%d-%d" % (seed, i),
            timestamp=1_700_000_000_000 + i,
        )
        for i in range(count)
    ]
    return bytearray(build_batch(records, partition_leader_epoch=LEADER_EPOCH))


class Workload:
    """One response body per round, offsets continuing round after round."""

    def __init__(self, partitions: int, batches: int, batch_bytes: int) -> None:
        self.partitions = partitions
        self.batches = batches
        self.template = [make_batch(batch_bytes, seed) for seed in range(batches)]
        self.records_per_batch = int.from_bytes(self.template[0][57:61], "big")
        self.record_bytes = partitions * sum(len(batch) for batch in self.template)
        self.request = ReplicaFetch(
            tuple(
                FetchTarget(TopicPartition(TOPIC, p), TOPIC_ID, FetchPartition(p, 0, 1 << 20))
                for p in range(partitions)
            ),
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=10 << 20,
        )

    def body(self, round_index: int) -> memoryview:
        """Round ``round_index``'s response: every partition's batches at its next offsets."""
        per_round = self.batches * self.records_per_batch
        base = round_index * per_round
        chunks = bytearray()
        for index, batch in enumerate(self.template):
            patch_base_offset(batch, 0, base + index * self.records_per_batch)
            chunks += batch
        records = bytes(chunks)
        high_watermark = base + per_round
        partitions = tuple(
            PartitionData(p, 0, high_watermark, high_watermark, 0, records=(records,))
            for p in range(self.partitions)
        )
        response = FetchResponse((FetchableTopicResponse(partitions, topic_id=TOPIC_ID),))
        segments = encode_fetch_response(response, VERSION)
        return memoryview(segments.to_bytes(lambda part: b""))


def kafka_python_decode(
    body: memoryview, version: int, request: ReplicaFetch
) -> dict[TopicPartition, PartitionData]:
    """The follower's decoder before issue 18 (kafka-python's generated classes), kept here
    as the baseline: it copies the frame, then each partition's records."""
    response = KafkaPythonFetchResponse.decode(bytes(body), version=version)
    wanted = {(t.topic_id, t.topic_partition.partition): t.topic_partition for t in request.targets}
    answers = {}
    for topic in response.responses:
        for partition in topic.partitions:
            topic_partition = wanted.get((topic.topic_id, partition.partition_index))
            if topic_partition is not None:
                records = partition.records
                answers[topic_partition] = PartitionData(
                    partition.partition_index,
                    partition.error_code,
                    partition.high_watermark,
                    partition.last_stable_offset,
                    partition.log_start_offset,
                    records=(records,) if records else (),
                )
    return answers


def open_logs(root: Path, name: str, partitions: int) -> dict[TopicPartition, PartitionLog]:
    config = LogConfig(segment_bytes=1 << 30)
    logs = {}
    for p in range(partitions):
        directory = root / name / f"{TOPIC}-{p}"
        directory.mkdir(parents=True)
        logs[TopicPartition(TOPIC, p)] = PartitionLog.open(directory, config)
    return logs


def one_round(
    decode: Decode,
    body: memoryview,
    request: ReplicaFetch,
    logs: dict[TopicPartition, PartitionLog],
) -> tuple[float, float]:
    """(decode seconds, decode + append seconds) of one response."""
    start = time.perf_counter()
    answers = decode(body, VERSION, request)
    decoded = time.perf_counter()
    for topic_partition, data in answers.items():
        action = Append(data.records or (), data.high_watermark, data.log_start_offset)
        append_fetched(logs[topic_partition], action)
    return decoded - start, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30 rounds: a smoke run")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--batches", type=int, default=16, help="batches per partition")
    parser.add_argument("--batch-kib", type=int, default=64)
    parser.add_argument(
        "--only", choices=["old", "new"], help="one path (for a profiler); no speed-up printed"
    )
    args = parser.parse_args()
    rounds = 30 if args.quick else args.rounds
    workload = Workload(args.partitions, args.batches, args.batch_kib * KIB)
    paths: dict[str, Decode] = {"old": kafka_python_decode, "new": decode_fetch_response}
    if args.only:
        paths = {args.only: paths[args.only]}
    root = Path(tempfile.mkdtemp(prefix="pykraft-follower-bench-"))
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    try:
        logs = {name: open_logs(root, name, args.partitions) for name in paths}
        for round_index in range(rounds + WARM_UP_ROUNDS):
            body = workload.body(round_index)
            order = list(paths) if round_index % 2 == 0 else list(reversed(paths))
            for name in order:
                sample = one_round(paths[name], body, workload.request, logs[name])
                if round_index >= WARM_UP_ROUNDS:
                    times[name].append(sample)
        for name in paths:
            ends = {tp: log.log_end_offset for tp, log in logs[name].items()}
            expected = (rounds + WARM_UP_ROUNDS) * args.batches * workload.records_per_batch
            assert set(ends.values()) == {expected}, f"{name} appended wrongly: {ends}"
            for log in logs[name].values():
                log.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    result: dict[str, object] = {
        "bench": "follower_path",
        "partitions": args.partitions,
        "batches_per_partition": args.batches,
        "batch_kib": args.batch_kib,
        "records_per_batch": workload.records_per_batch,
        "response_mb": round(workload.record_bytes / MB, 3),
        "rounds": rounds,
        "version": VERSION,
        "loadavg_1m": round(load[0], 2),
    }
    print(
        f"follower fetch path: {args.partitions} partitions x {args.batches} batches of "
        f"{args.batch_kib} KiB ({workload.records_per_batch} records of 1 KiB), "
        f"{rounds} rounds, load average {load[0]:.2f}"
    )
    print(f"{'path':<6}{'decode ms':>12}{'decode+append ms':>20}{'MB/s':>10}")
    for name, samples in times.items():
        decode_ms = statistics.median(sample[0] for sample in samples) * 1000
        total_ms = statistics.median(sample[1] for sample in samples) * 1000
        mb_s = workload.record_bytes / MB / (total_ms / 1000)
        print(f"{name:<6}{decode_ms:>12.3f}{total_ms:>20.3f}{mb_s:>10.1f}")
        result[f"{name}_decode_ms"] = round(decode_ms, 4)
        result[f"{name}_total_ms"] = round(total_ms, 4)
        result[f"{name}_mb_s"] = round(mb_s, 1)
    if len(paths) == 2:
        result["decode_speedup"] = round(result["old_decode_ms"] / result["new_decode_ms"], 2)  # type: ignore[operator]
        result["total_speedup"] = round(result["old_total_ms"] / result["new_total_ms"], 2)  # type: ignore[operator]
        print(f"speed-up: decode x{result['decode_speedup']}, total x{result['total_speedup']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
