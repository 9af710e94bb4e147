"""Kafka's test ``MockRandom`` with ``java.util.Random.nextInt(bound)`` semantics.

Kafka's placement tests (``StripedReplicaPlacerTest``) use
``org.apache.kafka.metadata.MockRandom``: a fixed linear congruential generator feeding
``Random.nextInt``. Reproducing both lets our placer be checked against Kafka's own vectors.
"""

from __future__ import annotations

_MASK64 = (1 << 64) - 1


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class KafkaMockRandom:
    """``randrange(n)`` returns what Kafka's ``MockRandom().nextInt(n)`` would."""

    def __init__(self) -> None:
        self._state = 17

    def _next(self, bits: int) -> int:
        # state = state * 2862933555777941757L + 3037000493L, in 64-bit wrapping arithmetic;
        # the result is (int) (state >>> (64 - bits)).
        self._state = (self._state * 2862933555777941757 + 3037000493) & _MASK64
        return _int32(self._state >> (64 - bits))

    def randrange(self, bound: int, /) -> int:
        # java.util.Random.nextInt(int bound)
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return _int32((bound * r) >> 31)
        u = r
        r = u % bound
        while _int32(u - r + m) < 0:
            u = self._next(31)
            r = u % bound
        return r
