"""Live per-broker throughput from the heartbeats' counters (issue 16): pure, time passed in.

Why heartbeats: every broker already heartbeats to the active controller over the broker RPC
(``metadata/api/brokers.py``) every ``broker.heartbeat.interval.ms``, authenticated as that
broker, while the controller knows none of the brokers' metrics endpoints. So each heartbeat
carries the broker's cumulative all-topics ``BrokerTopicMetrics`` counts
(``BrokerTopicCounters``) with the broker's own monotonic time when it read them
(``sampled_ms``), and the active controller keeps, per broker, the last two of them with its
monotonic time at receipt — in memory only, per leadership, as Kafka's
``BrokerHeartbeatManager`` keeps its per-broker state; nothing goes to the metadata log. A rate
is the difference of the two samples over the time between them: the broker's own times (one
clock per process, so per broker epoch), else, from a broker that does not send them, the
controller's times of receipt (taken before the heartbeat waits for the controller's write).
Two samples less than ``MIN_RATE_WINDOW_MS`` apart never make a rate: a heartbeat delayed and
then one on time would otherwise divide a second's records by a fraction of one.

No negative or invented rate:
- a sample from another broker epoch (the broker restarted or re-registered) or with a counter
  below the last one's (the counters restarted) starts over: one sample, no rate until the next;
- a heartbeat without counters (a broker that does not send them) forgets the broker's samples;
- a last sample older than ``max_age_ms`` (the broker stopped heartbeating) gives no rate.
"No rate" is ``None``, which the console shows as "-".

Bounded: at most ``MAX_TRACKED_BROKERS`` brokers; past it the one heard from longest ago goes.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.brokers import BrokerTopicCounters

MAX_TRACKED_BROKERS = 10_000
# Half Kafka's broker.heartbeat.interval.ms default (2000): the shortest time a rate spans.
MIN_RATE_WINDOW_MS = 1_000


@attrs.frozen
class CounterSample:
    broker_epoch: int
    counters: BrokerTopicCounters
    received_ms: int  # the controller's monotonic clock when the heartbeat arrived
    # The broker's monotonic clock when it read the counters; None from a broker without it.
    sampled_ms: int | None = None


@attrs.frozen
class BrokerRates:
    """Per second, between a broker's last two samples (names as ``BrokerTopicCounters``)."""

    messages_in: float
    bytes_in: float
    bytes_out: float
    replication_bytes_in: float
    replication_bytes_out: float
    fetch_requests: float


@attrs.frozen
class _Samples:
    latest: CounterSample
    # Invariant: same broker epoch as ``latest``, at least MIN_RATE_WINDOW_MS before it
    # (``_elapsed_ms``), no counter above it.
    previous: CounterSample | None = None


def _elapsed_ms(before: CounterSample, after: CounterSample) -> int:
    """The time between two samples of one broker epoch: on the broker's clock if both carry
    it, else on the controller's."""
    if before.sampled_ms is not None and after.sampled_ms is not None:
        return after.sampled_ms - before.sampled_ms
    return after.received_ms - before.received_ms


def _went_back(before: BrokerTopicCounters, after: BrokerTopicCounters) -> bool:
    return any(b > a for b, a in zip(attrs.astuple(before), attrs.astuple(after), strict=True))


class HeartbeatRates:
    """The active controller's last two counter samples per broker."""

    def __init__(self, max_brokers: int = MAX_TRACKED_BROKERS) -> None:
        assert max_brokers > 0
        self.max_brokers = max_brokers
        self._samples: dict[int, _Samples] = {}

    def handle_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        counters: BrokerTopicCounters | None,
        now_ms: int,
        sampled_ms: int | None = None,
    ) -> None:
        """An accepted heartbeat of ``broker_id`` arrived at ``now_ms`` carrying ``counters``
        read at ``sampled_ms`` on the broker's clock."""
        known = self._samples.pop(broker_id, None)
        if counters is None:
            return
        sample = CounterSample(broker_epoch, counters, now_ms, sampled_ms)
        if (
            known is None
            or known.latest.broker_epoch != broker_epoch
            or _went_back(known.latest.counters, counters)
            or _elapsed_ms(known.latest, sample) < 0  # not a later sample of this process
        ):
            kept = _Samples(sample)
        elif _elapsed_ms(known.latest, sample) < MIN_RATE_WINDOW_MS:
            # Too close to the last one (or in its millisecond): the newer counts replace it,
            # the window stays open.
            kept = _Samples(sample, known.previous)
        else:
            kept = _Samples(sample, known.latest)
        if len(self._samples) >= self.max_brokers:
            self._samples.pop(next(iter(self._samples)))  # heard from longest ago
        self._samples[broker_id] = kept  # re-inserted: the dict is in order of last heartbeat

    def rates(self, broker_id: int, now_ms: int, max_age_ms: int) -> BrokerRates | None:
        """The broker's rates, or None: fewer than two samples, or the last one is older than
        ``max_age_ms`` at ``now_ms``."""
        known = self._samples.get(broker_id)
        if known is None or known.previous is None:
            return None
        latest, previous = known.latest, known.previous
        if now_ms - latest.received_ms > max_age_ms:
            return None
        elapsed_ms = _elapsed_ms(previous, latest)
        assert elapsed_ms >= MIN_RATE_WINDOW_MS, known
        seconds = elapsed_ms / 1000
        growth = [
            (after - before) / seconds
            for before, after in zip(
                attrs.astuple(previous.counters), attrs.astuple(latest.counters), strict=True
            )
        ]
        assert min(growth) >= 0, known
        return BrokerRates(*growth)

    def all_rates(self, now_ms: int, max_age_ms: int) -> dict[int, BrokerRates]:
        found = {b: self.rates(b, now_ms, max_age_ms) for b in self._samples}
        return {broker_id: rates for broker_id, rates in found.items() if rates is not None}
