"""Replica placement: Kafka's ``StripedReplicaPlacer``, rack-aware, from a random start.

Theory of operation. Brokers are grouped into racks (``None`` is a rack of its own when racks are
not configured). Each rack keeps two sorted lists, unfenced and fenced brokers, each with its own
random start offset; the racks themselves are sorted and the rack list gets a random start offset
too. One partition's replicas are taken round-robin across racks starting at the rack offset:
the first replica (the preferred leader) must be an unfenced broker, later ones prefer unfenced
brokers and fall back to fenced ones only when a rack has run out. Each partition advances the
rack offset by one and starts a new "iteration epoch", which advances every broker list's offset
by one, giving the characteristic striped layout::

    partition 0: A0, B0, C0
    partition 1: B1, C1, A1
    partition 2: C2, A2, B2

After as many partitions as there are unfenced brokers, racks and broker lists are reshuffled so
large topics do not repeat the same pattern. Randomness comes only from the ``RandomSource``
passed in (a seeded ``random.Random`` in tests and simulations), so placement is deterministic
for a given seed. The controller passes only the brokers it wants used (pykraft: unfenced,
not shutting down); the fenced-broker logic is kept so the module matches Kafka's test vectors
(``StripedReplicaPlacerTest``).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableSequence
from typing import Any, Protocol

import attrs


class RandomSource(Protocol):
    """What the controller needs from a random number generator; ``random.Random`` fits."""

    def randrange(self, stop: int, /) -> int: ...


class PlacementError(ValueError):
    """Placement is impossible; the message is Kafka's ``InvalidReplicationFactorException``."""


@attrs.frozen
class UsableBroker:
    """A broker the placer may use (Kafka's ``UsableBroker``)."""

    id: int
    rack: str | None
    fenced: bool = False


def shuffle(items: MutableSequence[Any], rng: RandomSource) -> None:
    """Fisher-Yates with ``rng.randrange`` — the swap order of Java's ``Collections.shuffle``."""
    for i in range(len(items) - 1, 0, -1):
        j = rng.randrange(i + 1)
        items[i], items[j] = items[j], items[i]


class _BrokerList:
    """A sorted list of broker ids iterated round-robin from an offset, once per epoch."""

    __slots__ = ("brokers", "epoch", "index", "offset")

    def __init__(self) -> None:
        self.brokers: list[int] = []
        # How many brokers this epoch has returned; offset is added to it modulo the size.
        self.index = 0
        self.offset = 0
        self.epoch = 0

    def initialize(self, rng: RandomSource) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker id of this epoch, or -1 once every broker was returned."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


class _Rack:
    __slots__ = ("fenced", "unfenced")

    def __init__(self) -> None:
        self.fenced = _BrokerList()
        self.unfenced = _BrokerList()

    def next(self, epoch: int) -> int:
        """Unfenced brokers first; fenced ones only when the unfenced list is exhausted."""
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


def _rack_sort_key(name: str | None) -> tuple[bool, str]:
    # Kafka's OptionalStringComparator: the empty rack sorts first.
    return (name is not None, name or "")


class RackList:
    """All racks of the cluster; ``place`` returns one partition's replicas per call."""

    def __init__(self, rng: RandomSource, brokers: Iterable[UsableBroker]) -> None:
        self._rng = rng
        self._racks: dict[str | None, _Rack] = {}
        self.num_total_brokers = 0
        self.num_unfenced_brokers = 0
        for broker in brokers:
            rack = self._racks.setdefault(broker.rack, _Rack())
            if broker.fenced:
                rack.fenced.brokers.append(broker.id)
            else:
                rack.unfenced.brokers.append(broker.id)
                self.num_unfenced_brokers += 1
            self.num_total_brokers += 1
        self.rack_names: list[str | None] = sorted(self._racks, key=_rack_sort_key)
        # Deterministic order for the random draws (Kafka walks a HashMap, which for its test
        # racks is this sorted order too).
        for name in self.rack_names:
            self._racks[name].fenced.initialize(rng)
            self._racks[name].unfenced.initialize(rng)
        self._epoch = 0
        self._offset = rng.randrange(len(self.rack_names)) if self.rack_names else 0

    def place(self, replication_factor: int) -> list[int]:
        """One partition's replicas; the first is an unfenced broker (the preferred leader)."""
        check_replication_factor(
            replication_factor, self.num_total_brokers, self.num_unfenced_brokers
        )
        # After one pass over the unfenced brokers, reshuffle to avoid repeating assignments
        # (but never for a single broker, which would loop forever).
        if self._epoch == self.num_unfenced_brokers and self.num_unfenced_brokers > 1:
            self._shuffle()
            self._epoch = 0
        if self._offset == len(self.rack_names):
            self._offset = 0
        first_rack_index, leader = self._first_unfenced()
        brokers = [leader]
        rack_index = self._offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if rack_index == first_rack_index:
                    # The leader's rack was already used for this round.
                    first_rack_index = -1
                else:
                    result = self._racks[self.rack_names[rack_index]].next(self._epoch)
                rack_index = (rack_index + 1) % len(self.rack_names)
            brokers.append(result)
        self._epoch += 1
        self._offset += 1
        return brokers

    def _first_unfenced(self) -> tuple[int, int]:
        index = self._offset
        while True:
            result = self._racks[self.rack_names[index]].unfenced.next(self._epoch)
            if result >= 0:
                return index, result
            index = (index + 1) % len(self.rack_names)

    def _shuffle(self) -> None:
        shuffle(self.rack_names, self._rng)
        for name in sorted(self._racks, key=_rack_sort_key):
            shuffle(self._racks[name].fenced.brokers, self._rng)
            shuffle(self._racks[name].unfenced.brokers, self._rng)


def check_replication_factor(
    replication_factor: int, num_total_brokers: int, num_unfenced_brokers: int
) -> None:
    """Raise ``PlacementError`` with Kafka's messages when placement cannot succeed."""
    if replication_factor <= 0:
        raise PlacementError(
            f"Invalid replication factor {replication_factor}: the "
            "replication factor must be positive."
        )
    if replication_factor > num_total_brokers:
        raise PlacementError(
            f"The target replication factor of {replication_factor} cannot be "
            f"reached because only {num_total_brokers} broker(s) are registered."
        )
    if num_unfenced_brokers == 0:
        raise PlacementError("All brokers are currently fenced.")


def place_replicas(
    brokers: Iterable[UsableBroker],
    *,
    num_partitions: int,
    replication_factor: int,
    rng: RandomSource,
) -> tuple[tuple[int, ...], ...]:
    """Replicas for ``num_partitions`` new partitions, each ``replication_factor`` long.

    Raises ``PlacementError`` when the factor is not positive, exceeds the brokers given, or
    every broker is fenced.
    """
    rack_list = RackList(rng, brokers)
    check_replication_factor(
        replication_factor, rack_list.num_total_brokers, rack_list.num_unfenced_brokers
    )
    return tuple(tuple(rack_list.place(replication_factor)) for _ in range(num_partitions))
