"""Many partitions (issue 18): 10,000 on one broker, 100,000 across three.

    .venv/bin/python -m bench.scale            # 10,000 on 1 broker, then 100,000 on 3 (long)
    .venv/bin/python -m bench.scale --quick    # 2,000 on 1 broker, then 10,000 on 3
    .venv/bin/python -m bench.scale --partitions 10000 --brokers 1   # one configuration
    .venv/bin/python -m bench.scale --partitions 15000 --brokers 3 --create-only --logs DIR

Each configuration is one ``pykraft dev`` cluster (1 controller, ``--brokers`` brokers, RF=1 so
every partition is one log; the figures are per partition, as Kafka's are per replica). Measured,
each next to a peer or limit from the same run where one exists:

* create: topics of 100 partitions, 10 topics per CreateTopics request (confluent-kafka's
  AdminClient, as an operator's script would batch them; ``--topics-per-request``); partitions/s.
  Peer: the same number of partition directories with their two files (``.log``, ``.index``)
  made empty on this disk. Known limit (2026-11, load average 8-10 on this 2-core machine): a
  request of 1,000 partitions gets the broker fenced (no heartbeat within
  ``broker.session.timeout.ms``) and the next CreateTopics fails (INVALID_REPLICATION_FACTOR,
  or REQUEST_TIMED_OUT); ``--topics-per-request 1`` gets through. Reproduced at the first
  request and profiled (py-spy): not the controller (80% of its samples idle in pysyncobj's
  poll) but the broker's event loop, held by ``ReplicaManager.apply_delta`` creating the new
  partitions one after another (each: directory fsyncs, the leader-epoch checkpoint written and
  fsynced), so the heartbeat task does not run. Kafka heartbeats from its own thread
  (``BrokerLifecycleManager``'s event queue); pykraft does too since
  (``broker/heartbeat_thread.py``), and new logs are created in a worker thread
  (``broker/new_logs.py``); 10 topics per request was not re-measured since.
* served: from the last CreateTopics answer to one record produced to every partition and
  acknowledged (metadata at every broker, leaders loaded); and, on the loaded cluster, the same
  for one new topic of 100 partitions.
* produce: records/s, one 100-byte record per partition round-robin, ``--rounds`` rounds (linger
  5 ms); peer: the same number of records into one partition.
* RSS and open files per partition: each broker's growth from before creation, divided by its
  partitions.
* restart of one broker with its partitions, clean (SIGTERM) and after kill -9: seconds to exit,
  to RUNNING, and to every one of its partitions taking a produce again. Peer: listing the
  broker's log directories and stat-ing every file in them (what any start-up must at least do).
* controller: the size of its metadata log directory and the time to read it whole.
* fences: how many times the controller fenced a broker (its ``fenced broker(s)`` log lines)
  by the end of each stage; a live broker should never be (``fences_after_*``).

``--create-only`` stops after the served figures; ``--logs DIR`` keeps every node's log there
(the data directories are deleted either way), to read both sides of a fence.

Kafka's published KRaft figures, as a reference only (another machine, JVM, many cores):
KIP-500 (cwiki.apache.org KIP-500 "Replace ZooKeeper with a Self-Managed Metadata Quorum") and
Confluent's "A First Glimpse of a Kafka Without ZooKeeper" (confluent.io blog, 2021) aim KRaft
at millions of partitions per cluster with controlled shutdown and failover in seconds; KIP-578
quotes the ZooKeeper-era guideline of at most 4,000 partitions per broker and 200,000 per
cluster. Prints a table per configuration, then one JSON line. Never run by the tests.

Measured 2026-11-26 on the 2-core CI machine (load average ~3.3, other benches running),
2,000 partitions on 1 broker, ``--topics-per-request 1``, before -> after a leader-epoch write
without fsync (reverted that day: it let a follower truncate below its high watermark after a
power loss in the KIP-966 simulation; back since in the form that keeps it: entries added
without fsync, synced before the recovery point passes them) and indexes mapped on first use
(kept): create 184 -> 342
partitions/s (empty dirs on this disk: 0.7-3.5 s for 2,000); open files per partition 3.15 ->
1.05 (the index change); round-robin produce 10,179 -> 20,363 records/s (one partition:
~520,000); clean restart exit 11.8 -> 3.0 s; after kill -9, RUNNING 17.5 -> 6.3 s; RSS ~7 KiB
per partition; controller metadata 0.8 MiB. Part of the create and restart gains (44% and 33%
of busy time was that fsync in py-spy) came from the reverted write.
With ``ulimit -n`` 20,000 a broker could not hold 10,000 partitions before (3.15 descriptors
each); 100,000 across 3 brokers (33,000 each) needs a higher limit even at one per partition.

Measured 2026-11-26 16:05-16:20 UTC (superseded: see the last paragraph), load average 8-9
(other helpers' benches), ``--partitions 10000 --brokers 1 --topics-per-request 1``, with index
files sparse (``storage/index.py``; before, each partition that took a record reserved 20 MiB):
create 162.9 s = 61 partitions/s (10,000 empty dirs with two files: 4.9 s); served after
create 9.0 s; a new topic of 100 on the loaded cluster: created in 2,555 ms, served 86 ms later;
RSS 140 MiB, 6.6 KiB per partition; 1.01 open files per partition; round-robin produce 2,177
records/s (into one partition: 260,598); disk 209 MiB allocated in all (~21 KiB per
partition). Clean restart: exit 124 s (closing 10,000 logs: a producer snapshot written and
fsynced with its directory, the final time-index entry, the index trims), 10,200 logs loaded
in 18 s, RUNNING 30 s after the start, and then not served: becoming leader again writes
10,000 leader-epoch checkpoints (file and directory fsync) on the event loop, the heartbeat
starves, the controller fences the broker (5 times in 5 minutes), which unfences, gets the
leaderships back with new epochs and writes them all again. Before the index fix of that day
the restart did not even load: reading each time index's last entry mapped it, a descriptor
each, and the broker stopped with ``[Errno 24] Too many open files``. Where the create time
goes (py-spy, broker): 87% in ``apply_delta``; directory fsyncs 33% self, the leader-epoch
checkpoint 27%, creating the three files 27%. 100,000 on 3 brokers was not run: the hard limit
here is 20,000 and the container cannot raise it (no CAP_SYS_RESOURCE: ``setrlimit`` EPERM).
Instead ``--partitions 30000 --brokers 3 --topics-per-request 1`` (16:20-16:37, load 10-12):
create 384.9 s = 78 partitions/s, during which the controller fenced a broker 13 times (the
loop held by leader-epoch checkpoint writes, 97% of broker 11's samples; the controller idle);
each fence moved leaderships and new partitions to the others (broker 10 ended with ~16,000
partition dirs, 11 and 12 with ~5,700 and ~8,300), whose new epochs were written again, and
so on: one record to every partition was still not acknowledged 6 minutes after the last
CreateTopics (49 fences after 8 minutes), and the run was stopped there.

Re-measured 2026-11-26, ``--partitions 10000 --brokers 1 --topics-per-request 1``, load average
3-4 (other helpers' tests), main (16:43-16:52; leader-epoch entries without fsync, new logs in a
worker thread, sparse indexes) -> heartbeats on their own thread, logs closed on
``num.recovery.threads.per.data.dir`` (2, Kafka 4.0's default) threads, an unmapped index's
first entry written with pwrite (16:55-16:59). CreateTopics answered within 1-2 s in both (the
logs are made after the answer); served after create 349.9 -> 44.4 s (main: the controller
fenced the broker 14 times meanwhile, the loop applying the new partitions; after: none); a
new topic of 100 on the loaded cluster served in 343 -> 142 ms; RSS 8.3 -> 7.5 KiB and 1.01
open files per partition; round-robin produce 2,766 -> 4,881 records/s. Clean restart: exit
64.0 -> 19.1 s (cProfile of closing 1,000 logs: 2.4 of 5.8 s was the final
time-index entry written through a fresh map, the page fault holding the GIL; with pwrite,
2,000 logs close in 5.1 s on 1 thread, 3.3 s on 2, 1.5 s on 4), RUNNING 13.4 -> 26.5 s
(varies with load: logs loaded in 7-8 s both times), served 31.1 -> 32.3 s (on main too: the
leader-epoch fsyncs that fenced it before are gone). After kill -9: main could not start at all
(``cannot load log.dirs: [Errno 24] Too many open files``, 10 s in: recovery rebuilt every
active segment's time index through a map that kept a descriptor, two per partition); after:
RUNNING in 25.1 s, served in 31.1 s. Then ``--partitions 30000 --brokers 3`` (16:59-17:07,
load 5-8; before: 13 fences during creation and never served): served 245.7 s after the
CreateTopics (answered in 10.0 s), with 6 fences meanwhile (the controller's "session expired or
connection closed"; not chased further: probably a metadata long poll that failed on a busy
loop, which ends the session ``pykraft.broker.channel.closed.timeout.ms`` later unless a
heartbeat lands within it); a new topic of 100 served in 125 ms; produce 1,646
records/s; restart of a broker with 10,000 of them: clean exit 15.1 s, RUNNING 26.2 s, served
40.1 s; after kill -9 RUNNING 24.5 s, served 53.8 s; controller metadata 30.8 MiB.

Those fences, 2026-11-26 18:40-18:57 UTC, ``--partitions 15000 --brokers 3 --create-only --logs``
(load average 2-8, then 8-14 with another helper's scale bench): on main 2 fences, both of
broker 12 and both the fast kind (the controller's log, now naming the timeout: "connection
closed 1004 ms ago, no heartbeat for 1121 ms"); broker 12's log shows no failed poll, but 100+
auto-create CreateTopics calls (for topics its lagging image lacked) timing out together on the
client its loader polls with, after 56 s of making logs in the worker thread: the closed
connection was its last poll's, answered and back in the pool. Only a connection closed under a
waiting poll (or a heartbeat connection closed idle) counts now (``quorum/broker_channels.py``):
0 fences in two runs (served 122.1 s at load 7-8; 303.2 s at load 9-14), and with the heartbeat
connection watched too (19:19, load 2-4: no broker lagged, no auto-create) 0, served 21.9 s.
CreateTopics answered
in 2.6-5.0 s in all; the served time is the brokers making 5,000 logs each in a worker thread
(before_publish 56-111 s) and applying them on the loop (publish up to 17 s), every lagging
broker answering metadata requests with thousands of auto-create calls (5,465-9,802 per run,
all timing out: no in-flight set as Kafka's ``AutoTopicCreationManager`` keeps).

Restart, ``--partitions 10000 --brokers 1 --rounds 1`` (19:01-19:05, load 9-13): clean exit
28.1 s, RUNNING 52.6 s, served 95.8 s; kill -9 RUNNING 46.7 s (its fast fence, correct), served
84.5 s. From the broker's log, clean: process up 2 s, 10,200 logs loaded 12 s, registered,
metadata caught up 3 s (20,932 records), then 35 s from RECOVERY to RUNNING: installing the
publisher applies the whole image (10,000 leaderships) on the event loop in one go, the loop
held throughout (the loader's poll meanwhile timed out at 15 s). The step that varies with load
(13.4 against 26.5 s before) is that one; not changed here. Where it goes (cProfile, in process:
``tests/broker/replica_harness.Cluster`` with 2,000 partitions, closed, reopened, the whole
image published again; load 4): 5.2 s, of which 3.6 s ``os.replace`` in writing each new
leader's leader-epoch checkpoint (``storage/atomic_file.write_atomically``, 1.8 ms a rename on
this disk; without fsync since the fix above, but still a rename per partition, on the loop)
and 0.75 s ``LogManager.update_topic_config`` (each partition's call walks its topic's 100).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common import RunningCluster
from bench.replication import broker_state, wait_for
from pykraft.dev import Node, plan_layout
from pykraft.free_ports import pick_free_ports

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
VALUE = b"x" * 100
TIMEOUT_S = 1800.0
FENCE_LOG_LINE = "fenced broker(s)"
RESTART_SERVED_TIMEOUT_S = 240.0
# A broker holds at least one descriptor per partition; 100,000 across 3 is ~33,000 each, over
# this machine's `ulimit -n` (20,000). Kafka leaves the limit to the operator ("File descriptors
# and mmap": 100,000 or more); the bench (run as root) raises its own hard limit, which the
# brokers inherit and raise their soft limit to (pykraft/open_files.py).
OPEN_FILES_HARD_LIMIT = 262_144
KAFKA_REFERENCE = {
    "zookeeper_era_partitions_per_broker": 4_000,  # KIP-578's quoted guideline
    "zookeeper_era_partitions_per_cluster": 200_000,
    "kraft_partitions_per_cluster": "millions (KIP-500, Confluent 2021)",
}


class Cluster(RunningCluster):
    def __init__(self, root: Path, brokers: int) -> None:
        layout = plan_layout(1, brokers, 0, pick_free_ports(2 * (1 + brokers)))
        super().__init__(layout, root / "cluster")

    @property
    def brokers(self) -> tuple[Node, ...]:
        return self.dev.layout.brokers

    def pid(self, node: Node) -> int:
        return self.dev.processes[node.name].pid

    def data_dir(self, node: Node) -> Path:
        return self.dev.data_dir / node.name

    def fences(self) -> int:
        """How many times the controller fenced a broker so far (quorum/runner.py's log)."""
        controller = self.dev.layout.controllers[0]
        text = self.dev.log_path(controller).read_text(errors="replace")
        return text.count(FENCE_LOG_LINE)


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


# ------------------------------------------------------------------ the peers on this disk


def empty_partition_dirs_s(root: Path, count: int) -> float:
    """Kafka's least work per new partition on disk: a directory and its empty files."""
    base = root / "peer-dirs"

    def make() -> None:
        for index in range(count):
            directory = base / f"topic-{index}"
            directory.mkdir(parents=True)
            for name in ("00000000000000000000.log", "00000000000000000000.index"):
                (directory / name).touch()

    elapsed = timed(make)
    shutil.rmtree(base)
    return elapsed


def walk_s(directory: Path) -> float:
    def walk() -> None:
        for entry in os.scandir(directory):
            if entry.is_dir():
                for child in os.scandir(entry.path):
                    child.stat()

    return timed(walk)


def read_tree_s(directory: Path) -> tuple[int, float]:
    files = [p for p in directory.rglob("*") if p.is_file()]
    started = time.perf_counter()
    size = sum(len(p.read_bytes()) for p in files)
    return size, time.perf_counter() - started


# ------------------------------------------------------------------ the measurements


def create_topics(admin: AdminClient, names: list[str], per_request: int = 1) -> None:
    for start in range(0, len(names), per_request):
        batch = [
            NewTopic(
                name,
                num_partitions=PARTITIONS_PER_TOPIC,
                replication_factor=1,
            )
            for name in names[start : start + per_request]
        ]
        for future in admin.create_topics(batch, request_timeout=600).values():
            future.result()


def produce_rounds(
    bootstrap: str, targets: list[tuple[str, int]], rounds: int, timeout_s: float = TIMEOUT_S
) -> tuple[float, int]:
    """Seconds until ``rounds`` records to each of ``targets`` are acknowledged; retries."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "acks": "1",
            "queue.buffering.max.messages": 2_000_000,
            "message.timeout.ms": int(timeout_s * 1000),
            "topic.metadata.refresh.fast.interval.ms": 50,
            "log_level": 2,
        }
    )
    failures: list[str] = []

    def done(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(str(error))

    started = time.perf_counter()
    for _ in range(rounds):
        for index, (topic, partition) in enumerate(targets):
            while True:
                try:
                    producer.produce(topic, VALUE, partition=partition, on_delivery=done)
                    break
                except BufferError:
                    producer.poll(0.05)
            if index % 1000 == 0:
                producer.poll(0)
    remaining = producer.flush(timeout_s)
    elapsed = time.perf_counter() - started
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, {len(failures)} failed: {failures[:1]}")
    return elapsed, rounds * len(targets)


def restart_broker(
    cluster: Cluster, node: Node, targets: list[tuple[str, int]], signum: signal.Signals
) -> dict[str, Any]:
    process = cluster.dev.processes[node.name]
    stopped = time.perf_counter()
    process.send_signal(signum)
    process.wait(TIMEOUT_S)
    exit_s = time.perf_counter() - stopped
    started = time.perf_counter()
    cluster.dev.start(node)
    wait_for(lambda: broker_state(node) == "RUNNING", f"{node.name} RUNNING", TIMEOUT_S)
    running_s = time.perf_counter() - started
    figures: dict[str, Any] = {"exit_s": round(exit_s, 2), "running_s": round(running_s, 2)}
    try:
        produce_rounds(cluster.bootstrap_servers, targets, 1, RESTART_SERVED_TIMEOUT_S)
    except RuntimeError as error:  # e.g. fenced again and again (see the module docstring)
        figures["served_s"] = f"not within {RESTART_SERVED_TIMEOUT_S:.0f} s: {error}"[:160]
        return figures
    figures["served_s"] = round(time.perf_counter() - started, 2)
    return figures


def hosted(cluster: Cluster, node: Node, topics: list[str]) -> list[tuple[str, int]]:
    """The (topic, partition) pairs ``node`` leads, from the cluster's metadata."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    metadata = admin.list_topics(timeout=120)
    wanted = set(topics)
    return [
        (name, p.id)
        for name, topic in metadata.topics.items()
        if name in wanted
        for p in topic.partitions.values()
        if p.leader == node.node_id
    ]


class _Shown(dict[str, Any]):
    """A result that prints each figure as it is measured (a long run that fails late still
    leaves the figures it got)."""

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        print(f"  {key}: {value}", flush=True)


def measure(
    partitions: int,
    brokers: int,
    rounds: int,
    root: Path,
    topics_per_request: int,
    *,
    create_only: bool = False,
    logs: Path | None = None,
) -> dict[str, Any]:
    topics = [f"scale-{i:05}" for i in range(partitions // PARTITIONS_PER_TOPIC)]
    everything = [(t, p) for t in topics for p in range(PARTITIONS_PER_TOPIC)]
    result: dict[str, Any] = _Shown(
        {
            "partitions": partitions,
            "brokers": brokers,
            "topics_per_request": topics_per_request,
        }
    )
    result["peer_empty_dirs_s"] = round(empty_partition_dirs_s(root, partitions), 2)
    with Cluster(root, brokers) as cluster:
        try:
            _measure_on(cluster, result, topics, everything, rounds, create_only)
        except Exception:
            names = [n.name for n in (*cluster.dev.layout.controllers, *cluster.brokers)]
            print(cluster.dev.log_tails(names, lines=40), file=sys.stderr)
            raise
        finally:
            if logs is not None:
                kept = logs / f"{partitions}-on-{brokers}"
                shutil.copytree(cluster.dev.data_dir / "logs", kept, dirs_exist_ok=True)
                print(f"  node logs kept in {kept}", flush=True)
    return result


def _measure_on(
    cluster: Cluster,
    result: dict[str, Any],
    topics: list[str],
    everything: list[tuple[str, int]],
    rounds: int,
    create_only: bool,
) -> None:
    partitions, brokers = result["partitions"], result["brokers"]
    pids = [cluster.pid(b) for b in cluster.brokers]
    rss_before = [rss_bytes(p) for p in pids]
    fds_before = [open_files(p) for p in pids]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    create_s = timed(lambda: create_topics(admin, topics, result["topics_per_request"]))
    result["create_s"] = round(create_s, 2)
    result["create_partitions_per_s"] = round(partitions / create_s)
    result["fences_after_create"] = cluster.fences()
    served_s, _ = produce_rounds(cluster.bootstrap_servers, everything, 1)
    result["served_after_create_s"] = round(served_s, 2)
    result["fences_after_served"] = cluster.fences()
    probe = f"probe-{partitions}"
    probe_create_s = timed(lambda: create_topics(admin, [probe]))
    probe_served_s, _ = produce_rounds(
        cluster.bootstrap_servers, [(probe, p) for p in range(PARTITIONS_PER_TOPIC)], 1
    )
    result["new_topic_create_ms"] = round(probe_create_s * 1000)
    result["new_topic_served_ms"] = round(probe_served_s * 1000)
    if create_only:
        return
    rss_after = [rss_bytes(p) for p in pids]
    fds_after = [open_files(p) for p in pids]
    per_broker = partitions / brokers
    result["rss_mib_per_broker"] = [round(r / 2**20) for r in rss_after]
    result["rss_kib_per_partition"] = round(
        max(a - b for a, b in zip(rss_after, rss_before, strict=True)) / per_broker / 1024, 1
    )
    result["open_files_per_partition"] = round(
        max(a - b for a, b in zip(fds_after, fds_before, strict=True)) / per_broker, 2
    )
    elapsed, records = produce_rounds(cluster.bootstrap_servers, everything, rounds)
    result["produce_records_per_s"] = round(records / elapsed)
    create_topics(admin, ["one-partition"])
    one = [("one-partition", 0)] * partitions
    produce_rounds(cluster.bootstrap_servers, one[:100], 1)
    elapsed, records = produce_rounds(cluster.bootstrap_servers, one, rounds)
    result["peer_one_partition_records_per_s"] = round(records / elapsed)
    victim = cluster.brokers[-1]
    mine = hosted(cluster, victim, topics)
    result["restart_partitions"] = len(mine)
    result["peer_walk_log_dirs_s"] = round(walk_s(cluster.data_dir(victim)), 2)
    result["restart_clean"] = restart_broker(cluster, victim, mine, signal.SIGTERM)
    if isinstance(result["restart_clean"]["served_s"], str):
        result["restart_kill9"] = "skipped: the clean restart was not served"
    else:
        result["restart_kill9"] = restart_broker(cluster, victim, mine, signal.SIGKILL)
    controller = cluster.dev.layout.controllers[0]
    size, read_s = read_tree_s(cluster.data_dir(controller))
    result["controller_metadata_mib"] = round(size / 2**20, 1)
    result["controller_metadata_read_s"] = round(read_s, 3)
    result["fences_after_restarts"] = cluster.fences()


def show(result: dict[str, Any]) -> None:
    n = result["partitions"]
    rows = [
        ("create (partitions/s)", result["create_partitions_per_s"],
         f"{n} empty dirs+files on this disk: {result['peer_empty_dirs_s']} s"),
        ("create total (s)", result["create_s"], ""),
        ("served after create (s)", result["served_after_create_s"], "one record per partition"),
        ("new topic of 100: create / served (ms)",
         f"{result['new_topic_create_ms']} / {result['new_topic_served_ms']}", ""),
        ("fences after create / served",
         f"{result['fences_after_create']} / {result['fences_after_served']}", ""),
    ]  # fmt: skip
    if "restart_clean" in result:  # not --create-only
        rows += [
            ("RSS per partition (KiB)", result["rss_kib_per_partition"],
             f"broker RSS MiB {result['rss_mib_per_broker']}"),
            ("open files per partition", result["open_files_per_partition"], ""),
            ("produce round-robin (records/s)", result["produce_records_per_s"],
             f"same records into 1 partition: {result['peer_one_partition_records_per_s']}"),
            (f"restart clean, {result['restart_partitions']} partitions",
             result["restart_clean"], f"walk of its log dirs: {result['peer_walk_log_dirs_s']} s"),
            ("restart after kill -9", result["restart_kill9"], ""),
            ("controller metadata (MiB)", result["controller_metadata_mib"],
             f"read whole: {result['controller_metadata_read_s']} s"),
            ("fences after the restarts", result["fences_after_restarts"], ""),
        ]  # fmt: skip
    print(f"--- {n} partitions on {result['brokers']} broker(s)")
    for name, value, peer in rows:
        print(f"  {name:<42} {value!s:<44} {peer}")


def raise_hard_open_files_limit(wanted: int = OPEN_FILES_HARD_LIMIT) -> int:
    """Raise this process's hard RLIMIT_NOFILE (for the brokers it starts); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(wanted, int(Path("/proc/sys/fs/nr_open").read_text()))
    if hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, wanted))
        except (OSError, ValueError) as error:
            print(f"cannot raise the open files hard limit to {wanted}: {error}", file=sys.stderr)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 on 1 broker, 10,000 on 3")
    parser.add_argument("--partitions", type=int, help="one configuration of this many")
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--topics-per-request",
        type=int,
        default=TOPICS_PER_REQUEST,
        help="topics of 100 partitions per CreateTopics (10; fewer on a loaded machine: see the "
        "module docstring)",
    )
    parser.add_argument(
        "--create-only", action="store_true", help="stop after the served-after-create figures"
    )
    parser.add_argument("--logs", type=Path, help="keep every node's log in this directory")
    args = parser.parse_args(argv)
    if args.partitions:
        configurations = [(args.partitions, args.brokers)]
    elif args.quick:
        configurations = [(2_000, 1), (10_000, 3)]
    else:
        configurations = [(10_000, 1), (100_000, 3)]
    hard_limit = raise_hard_open_files_limit()
    print(f"brokers start with an open files hard limit of {hard_limit} (soft raised to it)")
    results = []
    for partitions, brokers in configurations:
        root = Path(tempfile.mkdtemp(prefix="bench-scale-"))
        try:
            results.append(
                measure(
                    partitions,
                    brokers,
                    args.rounds,
                    root,
                    args.topics_per_request,
                    create_only=args.create_only,
                    logs=args.logs,
                )
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        show(results[-1])
    print(json.dumps({"configurations": results, "kafka_reference": KAFKA_REFERENCE}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
