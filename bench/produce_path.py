"""The leader's produce path on its own: decode a Produce request, validate, append, answer.

    .venv/bin/python bench/produce_path.py            # 400 requests per figure
    .venv/bin/python bench/produce_path.py --quick    # 60 requests: a smoke run
    .venv/bin/python bench/produce_path.py --profile p3  # cProfile of one case

Why: issue 18 measured the leader's produce handling at about a third of a broker's busy time
under acks=all RF=3, most of it Python around ``os.pwrite`` and the CRC. This times that path
without sockets or a cluster, as ``bench/follower_path.py`` does the follower's: a Produce v9
request of 64 KiB batches of 1 KiB records (librdkafka's shape in ``bench/replication.py``) is
encoded once per partition count; each round decodes it, checks each partition's records as
``broker.handlers.produce.validate_records`` does, appends every batch with
``PartitionLog.append_as_leader`` to logs on disk (a temp dir, removed afterwards) and encodes
the response. Idempotent batches (a producer id and advancing sequences, CRC recomputed) are
prebuilt, so producer state is checked and updated as librdkafka's idempotent producer makes it.

Figures: microseconds per request (median round) and server CPU-seconds per 100 MB of record
bytes (``time.process_time`` over the timed rounds), for 1 and 3 partitions of one batch each
and 1,000 partitions of one 1 KiB record each (a round-robin request as in ``bench/scale.py``;
a quarter of the rounds). Requests are built outside the timed part.
Compare runs of one sitting only; the load average is printed. Ends with one JSON line. Never run
by the tests.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import shutil
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import crc32c

from pykraft.broker.handlers.produce import validate_records
from pykraft.protocol.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
    decode_produce_request,
    encode_produce_response,
)
from pykraft.protocol.wire import INT16, INT32, encode_uvarint
from pykraft.storage.log_config import LogConfig
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import ATTRIBUTES_POS, BATCH_HEADER_SIZE, CRC_POS, parse_header
from pykraft.storage.records import SimpleRecord, build_batch

KIB, MB = 1024, 1_000_000
VERSION = 9
TOPIC = "bench"
PRODUCER_ID, PRODUCER_EPOCH = 4000, 0
WARM_UP_ROUNDS = 5
_CRC = struct.Struct(">I")
# baseSequence is the header's last field but one: recordsCount (int32) ends it (KIP-98 layout,
# KAFKA_FORMATS.md); ``with_sequence`` reads it back.
SEQUENCE_POS = BATCH_HEADER_SIZE - 2 * INT32.size


def make_batch(record_bytes: int, count: int) -> bytearray:
    records = [
        SimpleRecord(value=os.urandom(record_bytes), timestamp=1_700_000_000_000 + i)
        for i in range(count)
    ]
    return bytearray(
        build_batch(
            records, producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH, base_sequence=0
        )
    )


def with_sequence(batch: bytearray, sequence: int) -> bytes:
    """``batch`` with base sequence ``sequence`` and its CRC recomputed."""
    copy = bytearray(batch)
    INT32.pack_into(copy, SEQUENCE_POS, sequence)
    _CRC.pack_into(copy, CRC_POS, crc32c.crc32c(memoryview(copy)[ATTRIBUTES_POS:]))
    assert parse_header(copy).base_sequence == sequence
    return bytes(copy)


def encode_request(batches: list[bytes]) -> bytearray:
    """Produce v9 (flexible): acks=-1, one topic, partition i carries ``batches[i]``."""

    out = bytearray(b"\x00")  # null transactional_id (compact: length + 1 = 0)
    out += INT16.pack(-1) + INT32.pack(30_000)
    out += encode_uvarint(2) + encode_uvarint(len(TOPIC) + 1) + TOPIC.encode()
    out += encode_uvarint(len(batches) + 1)
    for index, batch in enumerate(batches):
        out += INT32.pack(index) + encode_uvarint(len(batch) + 1) + batch + b"\x00"
    out += b"\x00\x00"
    return out


class Case:
    """Requests of ``partitions`` partitions, one batch of ``records`` records each."""

    def __init__(self, root: Path, partitions: int, records: int) -> None:
        self.partitions = partitions
        self.records = records
        self.template = make_batch(KIB, records)
        self.record_bytes = partitions * len(self.template)
        config = LogConfig(segment_bytes=1 << 30)
        self.logs = {
            (TOPIC, p): PartitionLog.open(root / f"{TOPIC}-{partitions}-{p}", config)
            for p in range(partitions)
        }

    def request(self, round_index: int) -> bytearray:
        """Every partition sees sequences 0, n, 2n, ...: one producer, a batch per round each."""
        batch = with_sequence(self.template, round_index * self.records)
        return encode_request([batch] * self.partitions)

    def run(self, body: memoryview) -> bytes:
        request = decode_produce_request(body, VERSION)
        topics = []
        for topic in request.topic_data:
            parts = []
            for partition in topic.partition_data:
                assert validate_records(partition.records, VERSION) is None
                assert partition.records is not None
                log = self.logs[(topic.name, partition.index)]
                info = log.append_as_leader(partition.records, 0, 1_700_000_000_000)
                parts.append(
                    PartitionProduceResponse(
                        partition.index,
                        base_offset=info.first_offset,
                        log_start_offset=info.log_start_offset,
                    )
                )
            topics.append(TopicProduceResponse(topic.name, tuple(parts)))
        return encode_produce_response(ProduceResponse(tuple(topics)), VERSION)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()


def measure(case: Case, rounds: int) -> dict[str, float]:
    for r in range(WARM_UP_ROUNDS):
        case.run(memoryview(case.request(r)))
    times = []
    cpu = 0.0
    for r in range(WARM_UP_ROUNDS, WARM_UP_ROUNDS + rounds):
        body = memoryview(case.request(r))  # built untimed
        cpu_start, start = time.process_time(), time.perf_counter()
        case.run(body)
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - cpu_start
    return {
        "us_per_request": round(statistics.median(times) * 1e6, 1),
        "cpu_s_per_100mb": round(cpu / (case.record_bytes * rounds / (100 * MB)), 3),
    }


CASES = {"p1": (1, 62), "p3": (3, 62), "p1000": (1000, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 rounds per figure")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--profile", choices=sorted(CASES), help="cProfile one case")
    args = parser.parse_args()
    rounds = 60 if args.quick else args.rounds
    root = Path(tempfile.mkdtemp(prefix="produce-path-"))
    figures: dict[str, float] = {"loadavg_1m": os.getloadavg()[0]}
    try:
        for name, (partitions, records) in CASES.items():
            case_rounds = max(10, rounds // 4) if partitions > 100 else rounds
            case = Case(root, partitions, records)
            try:
                if args.profile == name:
                    profiler = cProfile.Profile()
                    profiler.enable()
                    result = measure(case, case_rounds)
                    profiler.disable()
                    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
                else:
                    result = measure(case, case_rounds)
            finally:
                case.close()
            for key, value in result.items():
                figures[f"{name}_{key}"] = value
            print(
                f"{name:>6}: {result['us_per_request']:>9} us/request  "
                f"{result['cpu_s_per_100mb']:>6} cpu-s/100MB"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
