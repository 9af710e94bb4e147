"""Java's ``int`` hashing as Kafka uses it to place things: ``String.hashCode`` and ``Utils.abs``.

Kafka spreads a follower's partitions over its replica fetchers with
``Utils.abs(31 * topic.hashCode() + partition) % num.replica.fetchers`` and a consumer group over
``__consumer_offsets`` with ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``.
Every value in those formulas is a Java ``int``: ``String.hashCode`` sums UTF-16 code units with
signed 32-bit overflow, ``31 * h + partition`` overflows the same way, and ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (Java's ``Math.abs`` would return it unchanged, negative). Python's
own ``hash`` of a string is salted per process, so it could never match Kafka's assignment.
"""

from __future__ import annotations

_INT_MIN = -(2**31)
_UINT_MASK = 2**32 - 1


def to_int32(n: int) -> int:
    """Wrap an integer to a signed 32-bit value, as Java ``int`` arithmetic does."""
    n &= _UINT_MASK
    return n - 2**32 if n > 2**31 - 1 else n


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode``: ``h = 31 * h + unit`` over UTF-16 code units, signed 32-bit.

    A character outside the Basic Multilingual Plane counts as its two surrogate units.
    """
    h = 0
    # surrogatepass: a lone surrogate is a valid Java char, so hash it instead of failing.
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & _UINT_MASK
    return to_int32(h)


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` for an ``int``: 0 for ``Integer.MIN_VALUE``, else ``abs(n)``."""
    n = to_int32(n)
    return 0 if n == _INT_MIN else abs(n)
