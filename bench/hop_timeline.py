"""Where one record's time goes, hop by hop (issue 18): a per-hop timeline of records sent one
at a time through 1 controller + 3 brokers, for acks=all RF=3, acks=1 RF=3 and RF=1.

    .venv/bin/python -m bench.hop_timeline             # 300 records per configuration
    .venv/bin/python -m bench.hop_timeline --count 1000

The brokers run with ``PYKRAFT_HOP_TRACE`` (``storage/hop_trace.py``): each marks, on the
machine-wide monotonic clock, when it reads and writes a request or response (``read PRODUCE``,
``write FETCH``; the follower's fetcher ``send FETCH`` / ``receive FETCH``), when a follower
appended, a delayed fetch woke, the high watermark moved, and a delayed produce was watched and
completed. This bench sends each record only after the previous one was acknowledged
(confluent-kafka, linger.ms 0, as ``bench/replication.py``) and then stays idle for a gap
(``--gap-ms``, 5 ms by default) before the next: with acks=1 the followers receive, append and
fetch again after the ack, and without the gap their marks would land among the next record's.
Record N's window is [send N, send N+1) (the last one's ends with its gap), so its after-ack
marks stay with it; its latency is its send to its ack, outside the gap. For every mark in its
window it takes the offset from the send. Marks are named by
role: the partition's ``leader`` or a ``follower``; a mark seen twice in one record (two
followers, two Fetches) gets ``#2``; a mark of the leader's listener names the other end of
its connection (``leader write FETCH [follower 3]``, ``[client]``): the brokers' marks carry
the connection, so each Fetch answer, receive, append and next Fetch is paired with its
follower, never by order. Printed: per configuration, each mark's median offset in
microseconds (and in how many records it was seen), ordered by that median; then acks=all
RF=3's critical path, each hop's median microseconds (``CRITICAL_PATH``); then one JSON line
with each configuration's p50/p99 and the servers' CPU microseconds per record (user + system of
the brokers and the controller, idle gaps included: what the 2 cores must do for each record,
which contention moves less than the latency), keyed ``traced_*``: measured with tracing on and
records spaced out, they are not ``bench/replication.py``'s figures. The brokers write their
marks as they exit; a broker that left no marks file (killed, crashed) fails the run.
The tracing itself costs each mark a few microseconds, so the offsets run a little late.
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
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import cpu_seconds, print_figures
from bench.replication import (
    CONFIGURATIONS,
    PARTITIONS,
    RECORD_BYTES,
    Cluster,
    Producer,
    send_one,
)
from pykraft.storage import hop_trace

WARM_UP_RECORDS = 20
GAP_MS = 5.0  # idle after each ack, so the followers' after-ack marks fall before the next send
# (partition, send ns, ack ns, window end ns) of each record: its marks are in [send, end)
Window = tuple[int, int, int, int]


def one_at_a_time(
    bootstrap_servers: str, topic: str, acks: str, count: int, gap_ms: float = GAP_MS
) -> list[Window]:
    """Each record's partition, send and acknowledgement times (monotonic ns) and the end of
    its window: the next record's send, ``gap_ms`` after this one's ack."""
    producer = Producer(bootstrap_servers, acks, linger_ms=0)
    value = os.urandom(RECORD_BYTES)
    windows = []
    for index in range(count + WARM_UP_RECORDS):
        partition = index % PARTITIONS
        started = time.monotonic_ns()
        send_one(producer, topic, partition, value)
        ended = time.monotonic_ns()
        time.sleep(gap_ms / 1000)
        if index >= WARM_UP_RECORDS:
            windows.append((partition, started, ended, time.monotonic_ns()))
    producer.close()
    return windows


# A mark: (ns, event, endpoint). The endpoint is the follower end's ``host:port`` of the
# connection the mark was made on: a fetcher marks its own local address (``send FETCH @a``),
# the leader's listener its connection id ``local-peer-index`` (``write FETCH @l-a-3``), whose
# peer is that same address. Marks of no connection have "".
Mark = tuple[int, str, str]
Marks = dict[int, list[Mark]]


def parse_mark(line: str) -> Mark:
    nanos, event = line.split(" ", 1)
    event, _, where = event.partition(" @")
    parts = where.split("-")
    return int(nanos), event, parts[1] if len(parts) == 3 else where


def read_marks(directory: Path) -> Marks:
    """Each traced process's marks, by pid, in time order."""
    return {
        int(path.stem): sorted(parse_mark(line) for line in path.read_text().splitlines())
        for path in directory.glob("*.txt")
    }


def endpoint_pids(marks: Marks, broker_pids: list[int]) -> dict[str, int]:
    """Which broker each fetcher connection's follower end belongs to (its own marks say)."""
    return {
        endpoint: pid
        for pid in broker_pids
        for _, event, endpoint in marks.get(pid, [])
        if endpoint and event.startswith(("send ", "receive "))
    }


def timeline(
    windows: list[Window], marks: Marks, broker_pids: list[int], replication_factor: int
) -> list[tuple[str, float, int]]:
    """(mark, median microseconds after the send, records it was seen in), by median.
    Partition p's replicas are brokers p, p+1, ... (mod 3) of ``broker_pids``: the leader,
    then ``follower 2`` and ``follower 3``; other brokers' marks are ``other``. A listener's
    mark names the other end in brackets: ``[follower 2]``, or ``[client]``."""
    owners = endpoint_pids(marks, broker_pids)
    offsets: dict[str, list[float]] = defaultdict(list)
    for partition, started, ended, window_end in windows:
        replicas = [broker_pids[(partition + i) % len(broker_pids)] for i in range(3)]
        roles = {
            pid: "leader" if index == 0 else f"follower {index + 1}"
            for index, pid in enumerate(replicas[:replication_factor])
        }
        seen: list[tuple[int, str]] = []
        for pid, rows in marks.items():
            role = roles.get(pid, "other")
            for nanos, event, endpoint in rows:
                if not started <= nanos < window_end:
                    continue
                label = f"{role} {event}"
                if endpoint and not event.startswith(("send ", "receive ")):
                    other = owners.get(endpoint)
                    label += f" [{'client' if other is None else roles.get(other, 'other')}]"
                seen.append((nanos, label))
        counts: Counter[str] = Counter()
        for nanos, label in sorted(seen):
            counts[label] += 1
            name = label if counts[label] == 1 else f"{label} #{counts[label]}"
            offsets[name].append((nanos - started) / 1000)
        offsets["client acknowledged"].append((ended - started) / 1000)
    table = [(name, statistics.median(values), len(values)) for name, values in offsets.items()]
    return sorted(table, key=lambda row: row[1])


# The hops of an acks=all RF=3 record, in causal order: (name, from point, to point). Each
# follower's hops are paired by connection (``Mark``); the slower follower is the one whose next
# Fetch the leader reads last: the high watermark waits for it.
_FOLLOWER_HOPS = (
    ("fetches woken -> its Fetch answer written", "woken", "write"),
    ("answer written -> it receives it", "write", "receive"),
    ("receives -> appended", "receive", "appended"),
    ("appended -> its next Fetch sent", "appended", "send"),
    ("next Fetch sent -> leader reads it", "send", "read"),
)
CRITICAL_PATH = (
    ("client send -> leader reads Produce", "send", "read"),
    ("leader reads Produce -> appended, fetches woken", "read", "woken"),
    *(
        (
            f"{speed} follower: {hop}",
            start if start == "woken" else f"{speed} {start}",
            f"{speed} {end}",
        )
        for speed in ("faster", "slower")
        for hop, start, end in _FOLLOWER_HOPS
    ),
    ("leader reads the slower's Fetch -> high watermark moved", "slower read", "hw"),
    ("high watermark moved -> delayed produce completed", "hw", "completed"),
    ("delayed produce completed -> client has the ack", "completed", "ack"),
)


def _first(
    rows: list[Mark], event: str, after: int, before: int, endpoints: set[str] | None = None
) -> int | None:
    """The time of the first ``event`` in [after, before), on one of ``endpoints`` if given."""
    return next(
        (
            nanos
            for nanos, name, endpoint in rows
            if name == event
            and after <= nanos < before
            and (endpoints is None or endpoint in endpoints)
        ),
        None,
    )


def _follower_points(
    leader: list[Mark], rows: list[Mark], woken: int, end: int
) -> dict[str, int] | None:
    """One follower's points, each on its connection to the leader; None when one is missing."""
    endpoints = {endpoint for _, event, endpoint in rows if event == "send FETCH"}
    endpoints &= {endpoint for _, _, endpoint in leader}
    write = _first(leader, "write FETCH", woken, end, endpoints)
    receive = _first(rows, "receive FETCH", woken, end, endpoints)
    appended = _first(rows, "follower appended", receive or end, end)
    if write is None or receive is None or appended is None:
        return None
    send = _first(rows, "send FETCH", appended, end, endpoints)
    # From its append: the leader may read the Fetch before the follower's mark after the write.
    read = _first(leader, "read FETCH", appended, end, endpoints)
    if send is None or read is None:
        return None
    return {"write": write, "receive": receive, "appended": appended, "send": send, "read": read}


def critical_path_points(
    window: Window, marks: Marks, broker_pids: list[int]
) -> dict[str, int] | None:
    """One acks=all RF=3 record's points on its critical path; None when a mark is missing."""
    partition, started, ended, end = window
    replicas = [broker_pids[(partition + i) % len(broker_pids)] for i in range(3)]
    leader = marks.get(replicas[0], [])
    read = _first(leader, "read PRODUCE", started, end)
    woken = _first(leader, "fetch woken ENOUGH_BYTES", read or end, end)
    if read is None or woken is None:
        return None
    followers = [_follower_points(leader, marks.get(pid, []), woken, end) for pid in replicas[1:]]
    if None in followers:
        return None
    points = {"send": started, "ack": ended, "read": read, "woken": woken}
    by_read = sorted((f for f in followers if f is not None), key=lambda f: f["read"])
    for speed, follower in zip(("faster", "slower"), by_read, strict=True):
        points |= {f"{speed} {name}": nanos for name, nanos in follower.items()}
    high_watermark = _first(leader, "high watermark moved", woken, end)
    completed = _first(leader, "delayed completed", high_watermark or end, end)
    if high_watermark is None or completed is None:
        return None
    return points | {"hw": high_watermark, "completed": completed}


def critical_path(
    windows: list[Window], marks: Marks, broker_pids: list[int]
) -> tuple[list[tuple[str, float]], int, int]:
    """Each acks=all RF=3 hop's median microseconds, over how many records, and in how many
    of them the slower follower's answer was written first (pairing by order got those wrong)."""
    samples: dict[str, list[float]] = defaultdict(list)
    records = slower_answered_first = 0
    for window in windows:
        points = critical_path_points(window, marks, broker_pids)
        if points is None:
            continue
        records += 1
        slower_answered_first += points["slower write"] < points["faster write"]
        for name, start, end in CRITICAL_PATH:
            samples[name].append((points[end] - points[start]) / 1000)
    hops = [(name, statistics.median(samples[name])) for name, _, _ in CRITICAL_PATH]
    return hops, records, slower_answered_first


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=300, help="records per configuration")
    parser.add_argument(
        "--gap-ms", type=float, default=GAP_MS, help="idle after each ack, before the next send"
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the marks: each process's file goes to this folder"
    )
    args = parser.parse_args(argv)
    trace_directory = Path(tempfile.mkdtemp(prefix="pykraft-hop-trace-"))
    root = Path(tempfile.mkdtemp(prefix="pykraft-bench-hops-"))
    os.environ[hop_trace.ENV] = str(trace_directory)  # the brokers inherit it
    windows: dict[str, list[Window]] = {}
    cpu_us: dict[str, float] = {}
    try:
        with Cluster(root) as cluster:
            cluster.create_topic(
                "rf3", [[10, 11, 12], [11, 12, 10], [12, 10, 11]], **{"min.insync.replicas": "2"}
            )
            cluster.create_topic("rf1", [[10], [11], [12]])
            broker_pids = cluster.broker_pids()  # brokers 10, 11, 12
            for name, topic, acks in CONFIGURATIONS:
                servers = cpu_seconds(cluster.server_pids())
                windows[name] = one_at_a_time(
                    cluster.bootstrap_servers, topic, acks, args.count, args.gap_ms
                )
                servers = cpu_seconds(cluster.server_pids()) - servers
                cpu_us[name] = servers * 1e6 / (args.count + WARM_UP_RECORDS)
        marks = read_marks(trace_directory)  # the brokers wrote theirs as they exited
        missing = [pid for pid in broker_pids if pid not in marks]
        if missing:  # hop_trace writes at exit: a broker killed or crashed took its marks along
            raise RuntimeError(f"brokers with pids {missing} left no marks in {trace_directory}")
        if args.keep is not None:
            shutil.copytree(trace_directory, args.keep, dirs_exist_ok=True)
            (args.keep / "windows.json").write_text(json.dumps({**windows, "pids": broker_pids}))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(trace_directory, ignore_errors=True)
    figures: dict[str, Any] = {"records": args.count, "load_average": os.getloadavg()[0]}
    for name, topic, _ in CONFIGURATIONS:
        latencies = [(ended - started) / 1e6 for _, started, ended, _ in windows[name]]
        percentiles = statistics.quantiles(latencies, n=100)
        figures[f"traced_{name}_p50_ms"] = round(percentiles[49], 3)
        figures[f"traced_{name}_p99_ms"] = round(percentiles[98], 3)
        figures[f"traced_{name}_server_cpu_us_per_record"] = round(cpu_us[name])
        print(f"\n{name}: median microseconds after the client's send")
        factor = 1 if topic == "rf1" else 3
        for label, median_us, seen in timeline(windows[name], marks, broker_pids, factor):
            print(f"  {median_us:8.0f}  {label}  ({seen} records)")
    hops, records, swapped = critical_path(windows["acks_all_rf3"], marks, broker_pids)
    print(
        f"\nacks_all_rf3 critical path: median microseconds per hop ({records} records; in "
        f"{swapped} the slower follower's answer was written first)"
    )
    figures["acks_all_rf3_slower_answered_first_records"] = swapped
    for name, median_us in hops:
        print(f"  {median_us:8.0f}  {name}")
        figures[f"acks_all_rf3 {name} us"] = round(median_us)
    print()
    print_figures(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
