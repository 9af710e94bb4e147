"""Rates measured over a few time windows: Kafka's ``SampledStat`` of a ``WindowedSum`` with
its two ways to divide (``Rate`` and ``SimpleRate``), shared by the client quotas
(``broker/quotas.py``) and the replication throttles (``fetcher/replication_quota.py``).

Theory of operation. A rate keeps at most ``samples`` samples, each covering ``window_ms``, in
a ring. Recording adds to the current sample; once that sample is a window old the next slot
becomes current, reset to begin now (``SampledStat.record`` / ``advance``). Before measuring,
a sample as old as all the windows together is obsolete and reset
(``purgeObsoleteSamples``). The rate is the retained sum per second of a *window size*, and the
two rates differ only there:

* ``Rate.windowSize``: the time since the oldest sample began, raised to ``samples - 1`` full
  windows, so a client's first burst is spread over nearly all the windows (the client quotas);
* ``SimpleRate.windowSize``: the same time, at least one window, so a fresh quota admits about
  one window's worth of bytes, not ten (``ReplicationQuotaManager`` uses it for KIP-73).

Measuring opens no sample; ``open`` is Kafka's ``SampledStat.oldest(now)`` side effect, which a
quota uses to start measuring from the moment it is first consulted. Nothing here reads a
clock: every call takes ``now_ms``.
"""

from __future__ import annotations

import attrs


@attrs.define
class _Sample:
    start_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = now_ms
        self.value = 0.0


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` of a ``WindowedSum``, per second."""

    def __init__(self, *, samples: int, window_ms: int) -> None:
        assert samples >= 1 and window_ms >= 1, (samples, window_ms)
        self.samples = samples
        self.window_ms = window_ms
        # Invariant: at most ``samples`` samples; _current indexes one of them when any exist.
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value

    def open(self, now_ms: int) -> None:
        """The first sample begins now unless one exists (``SampledStat.oldest``)."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))

    def total(self, now_ms: int) -> float:
        """The sum of the retained samples (``WindowedSum.combine``)."""
        self._purge_obsolete(now_ms)
        return sum(sample.value for sample in self._samples)

    def measure(self, now_ms: int) -> float:
        """Per second over the retained samples; a read, which opens no sample."""
        return self.total(now_ms) * 1000.0 / self.window_size_ms(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        """``Rate.windowSize``: the time the samples span, at least ``samples - 1`` full
        windows (a new client is not judged on its first instant), never 0."""
        elapsed = self._elapsed_ms(now_ms)
        full_windows = elapsed // self.window_ms
        minimum = self.samples - 1
        if full_windows < minimum:
            elapsed += (minimum - full_windows) * self.window_ms
        return max(elapsed, 1)

    def _elapsed_ms(self, now_ms: int) -> int:
        """Since the oldest retained sample began; 0 with none."""
        self._purge_obsolete(now_ms)
        if not self._samples:
            return 0
        return now_ms - min(sample.start_ms for sample in self._samples)

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge_obsolete(self, now_ms: int) -> None:
        expire_age_ms = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample.start_ms >= expire_age_ms:
                sample.reset(now_ms)


class SimpleRate(Rate):
    """Kafka's ``SimpleRate``: a ``Rate`` whose window is the time since the oldest sample
    began, at least one window."""

    def window_size_ms(self, now_ms: int) -> int:
        return max(self._elapsed_ms(now_ms), self.window_ms)
