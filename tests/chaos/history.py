"""Operation histories in Jepsen's terms, recorded by the chaos workloads and the simulations.

A history is a list of ``Op``s in the order they happened. Every operation a client performs
appears twice: an ``INVOKE`` when it begins and a completion when it ends — ``OK`` (it happened),
``FAIL`` (it definitely did not: a send refused before it left the client, an aborted
transaction) or ``INFO`` (unknown: a send whose acknowledgement never came, a transaction whose
outcome its producer never learnt). A completion names its invocation (``invoked``). ``value``
holds the operation's micro-operations: ``Send``s (a record to a partition, with the offset the
broker acknowledged once known) and ``Poll``s (a record a consumer read at an offset).
``process`` names the client whose order matters: a producer (its sends are ordered per
partition, KIP-98 idempotence) or a consumer (its polls advance through each partition).

Times are passed in (``Recorder``'s clocks): ``wall`` for reading next to logs, ``monotonic``
for durations. This module is pure; ``tests.chaos.history_checker`` judges a history.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

import attrs

FINAL_READER = "final-reader"  # the processes that read every partition to its end, last
MICRO_OPS_SHOWN = 6  # an op's text names its first few micro-ops only (a final read holds all)


class OpType(enum.Enum):
    INVOKE = "invoke"
    OK = "ok"
    FAIL = "fail"
    INFO = "info"


@attrs.frozen
class Send:
    partition: int | None  # None until the producer's partitioner has chosen
    value: bytes
    offset: int | None = None  # as acknowledged; None until (or unless) it is


@attrs.frozen
class Poll:
    partition: int
    offset: int
    value: bytes


MicroOp = Send | Poll
M = TypeVar("M", Send, Poll)


@attrs.frozen(kw_only=True)
class Op:
    index: int  # position in the history
    process: str
    type: OpType
    f: str  # "send", "poll" or "txn"
    value: tuple[MicroOp, ...]
    wall: float
    monotonic: float
    invoked: int | None = None  # a completion's invocation index

    # Cached: the checker asks for them once per (value, reader) pair and more.
    @functools.cached_property
    def sends(self) -> tuple[Send, ...]:
        return micro_ops(self.value, Send)

    @functools.cached_property
    def polls(self) -> tuple[Poll, ...]:
        return micro_ops(self.value, Poll)

    def __str__(self) -> str:
        mops = " ".join(describe(m) for m in self.value[:MICRO_OPS_SHOWN])
        if len(self.value) > MICRO_OPS_SHOWN:
            mops += f" … {len(self.value) - MICRO_OPS_SHOWN} more"
        return f"#{self.index} {self.process} {self.type.value} {self.f} [{mops}]"


def micro_ops(value: Iterable[MicroOp], kind: type[M]) -> tuple[M, ...]:
    """The micro-ops of ``value`` that are ``kind``s, in order."""
    return tuple(m for m in value if isinstance(m, kind))


def describe(mop: MicroOp) -> str:
    verb = "send" if isinstance(mop, Send) else "poll"
    partition = "?" if mop.partition is None else mop.partition
    at = "?" if mop.offset is None else mop.offset
    return f"{verb} {partition}@{at}={mop.value.decode(errors='replace')}"


class Recorder:
    """Appends ops to a history from any thread, with times from the given clocks."""

    def __init__(self, wall: Callable[[], float], monotonic: Callable[[], float]) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._ops: list[Op] = []
        self._final: dict[int, tuple[Poll, ...]] | None = None

    def invoke(self, process: str, f: str, value: Iterable[MicroOp] = ()) -> Op:
        return self._append(process, OpType.INVOKE, f, tuple(value), None)

    def complete(
        self, invocation: Op, outcome: OpType, value: Iterable[MicroOp] | None = None
    ) -> Op:
        """``invocation``'s completion; its micro-ops unless ``value`` fills them in."""
        assert invocation.type is OpType.INVOKE and outcome is not OpType.INVOKE
        mops = invocation.value if value is None else tuple(value)
        return self._append(invocation.process, outcome, invocation.f, mops, invocation.index)

    def ok(self, process: str, f: str, value: Iterable[MicroOp]) -> Op:
        """An operation that completed as it began (a poll that returned records)."""
        return self.complete(self.invoke(process, f), OpType.OK, value)

    def final_read(self, logs: Mapping[int, Iterable[Poll]]) -> None:
        """A read of each partition from its start to its end, once the run is over. A history
        has one: the same read again records nothing (a workload's ``history()`` may be asked
        twice), another is an error (two final reads would read as nonmonotonic polls)."""
        polls = {partition: tuple(log) for partition, log in sorted(logs.items())}
        with self._lock:
            if self._final is not None:
                if polls != self._final:
                    raise ValueError("this history already has a different final read")
                return
            self._final = polls
        for partition, log in polls.items():
            self.ok(f"{FINAL_READER}-{partition}", "poll", log)

    def history(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def count(self, outcome: OpType, f: str) -> int:
        with self._lock:
            return sum(op.type is outcome and op.f == f for op in self._ops)

    def _append(
        self, process: str, outcome: OpType, f: str, value: tuple[MicroOp, ...], invoked: int | None
    ) -> Op:
        wall, monotonic = self._wall(), self._monotonic()
        with self._lock:
            op = Op(
                index=len(self._ops),
                process=process,
                type=outcome,
                f=f,
                value=value,
                wall=wall,
                monotonic=monotonic,
                invoked=invoked,
            )
            self._ops.append(op)
        return op


def completions(history: Sequence[Op]) -> list[Op]:
    """Every operation's completion (invocations with none are left out: still running)."""
    return [op for op in history if op.type is not OpType.INVOKE]


def invocation_order(history: Sequence[Op]) -> list[Op]:
    """The completions in the order their operations began (a producer's order of sends)."""
    return sorted(
        completions(history),
        key=lambda op: (op.index if op.invoked is None else op.invoked, op.index),
    )
