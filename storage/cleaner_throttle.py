"""The cleaner's I/O rate limit (Kafka's ``Throttler``, ``log.cleaner.io.max.bytes.per.second``).

Pure: the shell reports the bytes it read or wrote with ``now_ms``; once a check interval has
passed, the answer is how long to sleep for the bytes of the interval to fall back to the
desired rate (the sleeping is the shell's). The default rate is Kafka's: Double.MAX, no limit.
"""

from __future__ import annotations

import math

UNLIMITED = math.inf  # Kafka's default log.cleaner.io.max.bytes.per.second (Double.MaxValue)
CHECK_INTERVAL_MS = 300  # Kafka's Throttler.checkIntervalMs default


class Throttler:
    # Invariant: period_start_ms <= the latest now_ms seen; observed >= 0.

    def __init__(
        self, bytes_per_second: float, now_ms: int, check_interval_ms: int = CHECK_INTERVAL_MS
    ) -> None:
        assert bytes_per_second > 0, "a rate limit is positive"
        self.bytes_per_second = bytes_per_second
        self.check_interval_ms = check_interval_ms
        self._period_start_ms = now_ms
        self._observed = 0

    def maybe_throttle(self, observed_bytes: int, now_ms: int) -> int:
        """Milliseconds to sleep now (0: go on). Kafka ``Throttler.maybeThrottle``."""
        if math.isinf(self.bytes_per_second):
            return 0
        self._observed += observed_bytes
        elapsed_ms = now_ms - self._period_start_ms
        if elapsed_ms <= self.check_interval_ms:
            return 0
        rate = self._observed * 1000 / elapsed_ms
        sleep_ms = 0
        if rate > self.bytes_per_second:
            sleep_ms = max(0, round(self._observed * 1000 / self.bytes_per_second - elapsed_ms))
        self._period_start_ms = now_ms + sleep_ms
        self._observed = 0
        return sleep_ms
