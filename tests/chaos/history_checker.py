"""Judge a history (``tests.chaos.history``) as Jepsen's Kafka workload does.

The anomaly kinds and their meaning follow ``jepsen.tests.kafka`` (and the Redpanda 21.10
analysis that introduced them), read over partitions instead of Jepsen's keys, and over Kafka
offsets (sparse: transaction markers and aborted records take offsets a read_committed
consumer never returns) instead of Jepsen's dense indices:

* ``inconsistent-offsets``: one offset of a partition seen holding different values (by sends'
  acknowledgements and polls together: the "version order");
* ``duplicate``: one value at more than one offset (the workloads write unique values);
* ``lost-write``: an acknowledged value (or one of a transaction seen in part) never polled,
  although some poll read past its offset;
* ``unseen``: an acknowledged value never polled, at no offset below what polls reached (with a
  final read of everything in the history, this is loss too);
* ``vanished`` (ours, not Jepsen's): a value polled during the run that the final read (polls
  by processes named ``FINAL_READER-…``, which read every partition to its end) does not
  return: consumers read only committed records, so this is loss of a record that was read;
* ``aborted-read`` (Jepsen's G1a): a polled value whose writer definitely failed;
* ``poll-skip`` / ``int-poll-skip``: one consumer's successive polls (across two operations /
  inside one) jumped over an offset holding a value it should have seen;
* ``nonmonotonic-poll`` / ``int-nonmonotonic-poll``: ... went back to or before an offset
  already read;
* ``nonmonotonic-send`` / ``int-nonmonotonic-send``: one producer's later send to a partition
  landed at or before its earlier one (KIP-98 keeps an idempotent producer's order);
* ``G0``: a cycle of write-write (``ww``: one's value directly before the other's in a
  partition) dependencies among committed writers;
* ``G1c``: a cycle of write-read (``wr``: one polled the other's value) dependencies only;
* ``G1c-ww`` (ours): a cycle of ``ww`` and ``wr`` dependencies together, with at least one of
  each (and no ``wr``-only cycle among its writers).

As in Jepsen, G0 and G1c-ww are expected of Kafka's transactions, which do not isolate writes
from each other: ``Report.bad`` leaves them out unless asked. Jepsen's checker
(``jepsen.tests.kafka/allowed-error-types``, jepsen/src/jepsen/tests/kafka.clj) always allows
G0, and allows G1c once ww edges are inferred from offsets, since "the lack of write isolation
means we should expect cycles like t0 <ww t1 <wr t0"; only a cycle of ``wr`` edges alone is
forbidden at ``isolation.level = read_committed``. We keep the two apart rather than allow both
under one name.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence

import attrs

from tests.chaos.history import FINAL_READER, Op, OpType, Send, completions, invocation_order

KINDS = (
    "inconsistent-offsets",
    "duplicate",
    "lost-write",
    "unseen",
    "vanished",
    "aborted-read",
    "poll-skip",
    "int-poll-skip",
    "nonmonotonic-poll",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "G0",
    "G1c",
    "G1c-ww",
)
EXPECTED_OF_KAFKA = frozenset({"G0", "G1c-ww"})
EXAMPLES_MAX = 5

Slot = tuple[int, int]  # (partition, offset)


@attrs.frozen
class Anomaly:
    kind: str
    detail: str
    ops: tuple[Op, ...]

    def __str__(self) -> str:
        return f"{self.detail}: " + "; ".join(str(op) for op in self.ops)


@attrs.frozen(kw_only=True)
class Report:
    operations: Mapping[str, int]  # "f type" -> how many completions
    anomalies: Mapping[str, tuple[Anomaly, ...]]  # every kind, found or not

    def bad(self, tolerate: Iterable[str] = EXPECTED_OF_KAFKA) -> dict[str, int]:
        """The kinds found (with counts) that are not in ``tolerate``."""
        skip = set(tolerate)
        return {k: len(a) for k, a in self.anomalies.items() if a and k not in skip}

    @property
    def clean(self) -> bool:
        return not any(self.anomalies.values())

    def render(self, examples: int = EXAMPLES_MAX) -> str:
        lines = ["operations: " + ", ".join(f"{k} {n}" for k, n in sorted(self.operations.items()))]
        for kind in KINDS:
            found = self.anomalies[kind]
            lines.append(f"{kind}: {len(found)}")
            lines += [f"  {anomaly}" for anomaly in found[:examples]]
        return "\n".join(lines)


class _Observations:
    """The version order and who wrote and read each value."""

    def __init__(self, done: Sequence[Op]) -> None:
        self.at: dict[Slot, dict[bytes, list[Op]]] = defaultdict(lambda: defaultdict(list))
        self.writer: dict[bytes, Op] = {}
        self.readers: dict[bytes, list[Op]] = defaultdict(list)
        self.max_read: dict[int, tuple[int, Op]] = {}
        for op in done:
            for send in op.sends:
                self.writer[send.value] = op
                if send.partition is not None and send.offset is not None:
                    self.at[(send.partition, send.offset)][send.value].append(op)
            if op.type is OpType.OK:
                for poll in op.polls:
                    self.at[(poll.partition, poll.offset)][poll.value].append(op)
                    self.readers[poll.value].append(op)
                    if poll.offset > self.max_read.get(poll.partition, (-1, op))[0]:
                        self.max_read[poll.partition] = (poll.offset, op)
        self.offsets: dict[bytes, set[Slot]] = defaultdict(set)
        for slot, values in self.at.items():
            for value in values:
                self.offsets[value].add(slot)
        # A writer whose outcome is unknown committed if any of its values was read.
        self.committed = {
            op.index
            for op in done
            if op.sends
            and (
                op.type is OpType.OK
                or (op.type is OpType.INFO and any(s.value in self.readers for s in op.sends))
            )
        }
        self.expected: dict[int, list[int]] = defaultdict(list)  # offsets a poll must return
        for (partition, offset), values in sorted(self.at.items()):
            if any(self.should_be_read(v) for v in values):
                self.expected[partition].append(offset)

    def should_be_read(self, value: bytes) -> bool:
        writer = self.writer.get(value)
        return value in self.readers or (writer is not None and writer.index in self.committed)

    def skipped(self, partition: int, after: int, before: int) -> list[bytes]:
        offsets = self.expected.get(partition, [])
        between = offsets[bisect_right(offsets, after) : bisect_left(offsets, before)]
        return [v for o in between for v in self.at[(partition, o)] if self.should_be_read(v)]

    def place(self, send: Send) -> Slot | None:
        """Where ``send`` landed: as acknowledged, else where some poll saw its value."""
        if send.partition is not None and send.offset is not None:
            return (send.partition, send.offset)
        slots = [s for s in self.offsets.get(send.value, ()) if send.partition in (None, s[0])]
        return min(slots) if slots else None


def check(history: Sequence[Op]) -> Report:
    done = completions(history)
    seen = _Observations(done)
    found: dict[str, list[Anomaly]] = {kind: [] for kind in KINDS}
    for (partition, offset), values in sorted(seen.at.items()):
        if len(values) > 1:
            ops = tuple(dict.fromkeys(op for v in values.values() for op in v))
            shown = sorted(v.decode(errors="replace") for v in values)
            found["inconsistent-offsets"].append(
                Anomaly("inconsistent-offsets", f"{partition}@{offset} holds {shown}", ops)
            )
    for value, slots in sorted(seen.offsets.items()):
        if len(slots) > 1:
            ops = tuple(dict.fromkeys(op for s in sorted(slots) for op in seen.at[s][value]))
            found["duplicate"].append(
                Anomaly("duplicate", f"{value.decode(errors='replace')} at {sorted(slots)}", ops)
            )
    _writes_unread(seen, done, found)
    for value, readers in seen.readers.items():
        writer = seen.writer.get(value)
        if writer is not None and writer.type is OpType.FAIL:
            found["aborted-read"].append(
                Anomaly("aborted-read", f"{value.decode(errors='replace')}", (writer, readers[0]))
            )
    finals = [op for op in done if op.process.startswith(FINAL_READER) and op.type is OpType.OK]
    if finals:
        at_end = {poll.value for op in finals for poll in op.polls}
        for value, readers in seen.readers.items():
            if value not in at_end:
                text = value.decode(errors="replace")
                found["vanished"].append(Anomaly("vanished", text, (readers[0],)))
    _polls(seen, done, found)
    _sends(seen, history, found)
    _cycles(seen, done, found)
    return Report(
        operations=Counter(f"{op.f} {op.type.value}" for op in done),
        anomalies={kind: tuple(found[kind]) for kind in KINDS},
    )


def _writes_unread(
    seen: _Observations, done: Sequence[Op], found: dict[str, list[Anomaly]]
) -> None:
    for op in done:
        if op.index not in seen.committed:
            continue
        for send in op.sends:
            if send.value in seen.readers:
                continue
            slot = seen.place(send)
            reached, reader = seen.max_read.get(slot[0], (-1, op)) if slot else (-1, op)
            where = "an unknown offset" if slot is None else f"{slot[0]}@{slot[1]}"
            what = f"{send.value.decode(errors='replace')} at {where}"
            if slot is not None and slot[1] < reached:
                found["lost-write"].append(
                    Anomaly("lost-write", f"{what}, polls reached {reached}", (op, reader))
                )
            else:
                found["unseen"].append(Anomaly("unseen", what, (op,)))


def _polls(seen: _Observations, done: Sequence[Op], found: dict[str, list[Anomaly]]) -> None:
    last: dict[tuple[str, int], tuple[int, Op]] = {}  # (consumer, partition) -> offset, op
    for op in done:
        if op.type is not OpType.OK or not op.polls:
            continue
        mine: dict[int, list[int]] = defaultdict(list)
        for poll in op.polls:
            mine[poll.partition].append(poll.offset)
        for partition, offsets in mine.items():
            steps: list[tuple[int, int, tuple[Op, ...], str]] = [
                (offsets[i], offsets[i + 1], (op,), "int-") for i in range(len(offsets) - 1)
            ]
            if (op.process, partition) in last:
                before, previous = last[(op.process, partition)]
                steps.insert(0, (before, offsets[0], (previous, op), ""))
            for a, b, ops, prefix in steps:
                where = f"partition {partition}: {a} then {b}"
                if b <= a:
                    kind = prefix + "nonmonotonic-poll"
                    found[kind].append(Anomaly(kind, where, ops))
                elif skipped := seen.skipped(partition, a, b):
                    kind = prefix + "poll-skip"
                    shown = [v.decode(errors="replace") for v in skipped[:EXAMPLES_MAX]]
                    found[kind].append(Anomaly(kind, f"{where}, skipping {shown}", ops))
            last[(op.process, partition)] = (offsets[-1], op)


def _sends(seen: _Observations, history: Sequence[Op], found: dict[str, list[Anomaly]]) -> None:
    last: dict[tuple[str, int], tuple[int, Op]] = {}  # (producer, partition) -> offset, op
    for op in invocation_order(history):
        if op.type is OpType.FAIL:
            continue
        mine: dict[int, list[int]] = defaultdict(list)
        for send in op.sends:
            slot = seen.place(send)
            if slot is not None:
                mine[slot[0]].append(slot[1])
        for partition, offsets in mine.items():
            steps: list[tuple[int, int, tuple[Op, ...], str]] = [
                (offsets[i], offsets[i + 1], (op,), "int-") for i in range(len(offsets) - 1)
            ]
            if (op.process, partition) in last:
                before, previous = last[(op.process, partition)]
                steps.insert(0, (before, offsets[0], (previous, op), ""))
            for a, b, ops, prefix in steps:
                if b <= a:
                    kind = prefix + "nonmonotonic-send"
                    found[kind].append(Anomaly(kind, f"partition {partition}: {a} then {b}", ops))
            last[(op.process, partition)] = (offsets[-1], op)


Graph = dict[int, dict[int, str]]  # writer index -> successor index -> "ww" or "wr"


def _cycles(seen: _Observations, done: Sequence[Op], found: dict[str, list[Anomaly]]) -> None:
    by_index = {op.index: op for op in done}
    graph: Graph = defaultdict(dict)
    order: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for (partition, offset), values in seen.at.items():
        for value in values:
            writer = seen.writer.get(value)
            if writer is not None and writer.index in seen.committed:
                order[partition].append((offset, writer.index))
    for placed in order.values():
        placed.sort()
        for (_, a), (_, b) in itertools.pairwise(placed):
            if a != b:
                graph[a][b] = "ww"
    writers = {op.index for op in done if op.sends}
    wr_only: Graph = defaultdict(dict)  # apart: graph names one kind per pair, ww first
    for value, readers in seen.readers.items():
        writer = seen.writer.get(value)
        for reader in readers:
            if (
                writer is not None
                and writer.index in seen.committed
                and reader.index in writers
                and reader.index != writer.index
            ):
                graph[writer.index].setdefault(reader.index, "wr")
                wr_only[writer.index][reader.index] = "wr"
    ww: Graph = {a: {b: t for b, t in out.items() if t == "ww"} for a, out in graph.items()}
    for component in strongly_connected(ww):
        cycle = find_cycle(ww, component, None)
        found["G0"].append(_cycle_anomaly("G0", cycle, ww, by_index))
    pure = strongly_connected(wr_only)
    for component in pure:
        cycle = find_cycle(wr_only, component, None)
        found["G1c"].append(_cycle_anomaly("G1c", cycle, wr_only, by_index))
    for component in strongly_connected(graph):
        wr = [
            (a, b) for a in component for b, t in graph[a].items() if t == "wr" and b in component
        ]
        if wr and not any(inner <= component for inner in pure):
            # No wr-only cycle here, so every cycle through a wr edge takes a ww edge too.
            cycle = find_cycle(graph, component, wr[0])
            found["G1c-ww"].append(_cycle_anomaly("G1c-ww", cycle, graph, by_index))


def _cycle_anomaly(kind: str, cycle: list[int], graph: Graph, ops: Mapping[int, Op]) -> Anomaly:
    steps = " ".join(f"#{a} -{graph[a][b]}-> #{b}" for a, b in itertools.pairwise(cycle))
    return Anomaly(kind, f"cycle {steps}", tuple(ops[i] for i in cycle[:-1]))


def strongly_connected(graph: Graph) -> list[set[int]]:
    """The components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    out: list[set[int]] = []
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(graph.get(root, {})))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph.get(successor, {}))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(component)
    return out


def find_cycle(graph: Graph, component: set[int], through: tuple[int, int] | None) -> list[int]:
    """A shortest cycle inside ``component`` (through the edge ``through`` if given), as its
    nodes with the first repeated at the end."""
    start, first = through if through else (min(component), None)
    sources = [first] if first is not None else [b for b in graph[start] if b in component]
    parents: dict[int, int | None] = {s: None for s in sources}
    queue = deque(sources)
    while queue:
        current = queue.popleft()
        if current == start:
            break
        for successor in graph.get(current, {}):
            if successor in component and successor not in parents:
                parents[successor] = current
                queue.append(successor)
    if start not in parents:
        raise AssertionError(f"no cycle through {start} in {sorted(component)}")
    back: list[int] = []
    step = parents[start]
    while step is not None:
        back.append(step)
        step = parents[step]
    return [start, *reversed(back), start]
