"""The clean-shutdown marker's contents (Kafka's ``CleanShutdownFileHandler``, KIP-966).

A clean shutdown leaves ``.kafka_cleanshutdown`` in every log dir (``storage.recovery``). Since
KIP-966 it holds the broker epoch the broker had when it shut down, as Kafka writes it:
``{"version":0,"brokerEpoch":N}``. At the next start the broker sends that epoch as its
registration's ``PreviousBrokerEpoch``; the controller compares it with the epoch it knows and
treats a mismatch (or -1) as an unclean shutdown, which takes the broker out of every ISR and
ELR (``quorum/managers/cluster.py``). ``previous_broker_epoch`` is Kafka's
``LogManager.readBrokerEpochFromCleanShutdownFiles``: every log dir live and marked with the same
epoch, else -1. An empty marker (older pykraft) reads as no epoch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

CLEAN_SHUTDOWN_VERSION = 0
# BrokerRegistrationRequest.PreviousBrokerEpoch when there is none (Kafka's default).
NO_BROKER_EPOCH = -1


def encode_clean_shutdown(broker_epoch: int) -> bytes:
    return json.dumps(
        {"version": CLEAN_SHUTDOWN_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")
    ).encode("ascii")


def decode_clean_shutdown(data: bytes) -> int | None:
    """The broker epoch a marker holds, or None when it holds none (empty, malformed)."""
    try:
        content = json.loads(data)
    except ValueError:  # JSONDecodeError, UnicodeDecodeError
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if type(epoch) is int else None


def previous_broker_epoch(epochs: Iterable[int | None], all_dirs_live: bool) -> int:
    """One epoch if every dir is live and holds the same one; else ``NO_BROKER_EPOCH``."""
    found = set(epochs)
    if not all_dirs_live or len(found) != 1:
        return NO_BROKER_EPOCH
    (epoch,) = found
    return NO_BROKER_EPOCH if epoch is None else epoch
