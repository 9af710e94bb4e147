"""What a request's appends make completable, completed once they are all done (Kafka's
``ActionQueue``, which ``KafkaApis`` runs after each request's handler).

A waiting fetch or produce resumes inside the call that completes it (``broker.waking_future``).
Completed in the middle of a request's appends, it would see only part of them: with the leader
alone in the ISR (RF=1, or a shrunk ISR) the high watermark, and with it the last stable offset,
moves inside each partition's append (``Partition.append_records_to_leader``), and a consumer of
several of the request's partitions woken by the first move would read that partition's batch
alone. So a request's appends ``hold`` the queue; ``ReplicaManager``'s high-watermark and
last-stable-offset listeners and the follower wake-ups (``broker.local_append``) ``defer`` to it,
and ``release`` carries them out in order after the last append.

Holds nest: only the outermost holder releases (a WriteTxnMarkers request holds over all its
markers' appends, ``broker.txn_markers``). Outside a hold ``defer`` acts at once, so a high
watermark moved by a follower's fetch (acks=all with followers in the ISR: no move happens in
the append) wakes its waiters as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVarTuple

Ts = TypeVarTuple("Ts")

__all__ = ["ActionQueue"]


class ActionQueue:
    __slots__ = ("_held", "_holding")

    def __init__(self) -> None:
        self._holding = False
        # Invariant: empty unless holding; then what the held appends deferred, in order (at
        # most three per appended partition: high watermark, last stable offset, followers).
        self._held: list[tuple[Callable[..., object], tuple[Any, ...]]] = []

    def hold(self) -> bool:
        """Defer actions until ``release``; False when already held (its holder releases)."""
        if self._holding:
            return False
        self._holding = True
        return True

    def defer(self, action: Callable[[*Ts], object], *args: *Ts) -> None:
        """``action(*args)`` now, or at ``release`` while held."""
        if self._holding:
            self._held.append((action, args))
        else:
            action(*args)

    def release(self) -> None:
        """Stop holding and carry out the held actions in order; an action deferred while they
        run (by a fetch or produce one of them resumed) acts at once."""
        assert self._holding, "release without hold"
        self._holding = False
        if self._held:
            held, self._held = self._held, []
            for action, args in held:
                action(*args)
