"""The broker's log cleaner task (Kafka's ``CleanerThread``), and its ``log.cleaner.*`` config.

One asyncio task runs rounds of ``storage.log_cleaner.LogCleaner.clean_filthiest`` on a worker
thread (``log.cleaner.threads`` is accepted but one thread cleans: the GIL makes more of them no
faster); after a round with nothing to clean it waits ``log.cleaner.backoff.ms``. The worker
reads and writes segment files only: every look at a log's state and every swap of cleaned
segments runs on the event loop (``run_on_log``), between requests. Between batches the worker
reports the bytes it moved: the throttle (``storage.cleaner_throttle``, Kafka's ``Throttler`` at
``log.cleaner.io.max.bytes.per.second``) says how long to sleep, and the sleep ends early when
the broker stops (``stop``), which also aborts the cleaning at its next batch. After each
round the shell sets Kafka's cleaner gauges (``broker.log_cleaner_metrics``), on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from pykraft.broker.config_listeners import BrokerConfigError
from pykraft.broker.log_cleaner_metrics import LogCleanerMetrics
from pykraft.storage.cleaner import CleaningAbortedError
from pykraft.storage.cleaner_throttle import Throttler
from pykraft.storage.clock import Clock
from pykraft.storage.log_cleaner import (
    CleanerConfig,
    CleaningResult,
    LogCleaner,
    LogSource,
)

logger = logging.getLogger(__name__)

LOOP_CALL_POLL_S = 0.5  # how often a worker waiting on the loop checks for a stop


def cleaner_config_of(values: Mapping[str, str]) -> CleanerConfig:
    """``log.cleaner.*`` broker properties with Kafka's validators (``CleanerConfig``)."""
    default = CleanerConfig()
    enable = values.get("log.cleaner.enable", "true").strip().lower()
    if enable not in ("true", "false"):
        raise BrokerConfigError("log.cleaner.enable", f"{enable!r} must be true or false")
    return CleanerConfig(
        enable=enable == "true",
        num_threads=int(_number(values, "log.cleaner.threads", default.num_threads, 1)),
        dedupe_buffer_size=int(
            _number(values, "log.cleaner.dedupe.buffer.size", default.dedupe_buffer_size, 1)
        ),
        io_buffer_load_factor=_number(
            values, "log.cleaner.io.buffer.load.factor", default.io_buffer_load_factor, 0.0
        ),
        # A rate of 0 would never move a byte: Kafka divides by it; here it is refused.
        max_io_bytes_per_second=_number(
            values, "log.cleaner.io.max.bytes.per.second", default.max_io_bytes_per_second, 1.0
        ),
        backoff_ms=int(_number(values, "log.cleaner.backoff.ms", default.backoff_ms, 0)),
    )


def _number(values: Mapping[str, str], name: str, default: float, minimum: float) -> float:
    """An int or double property; an int-typed default keeps it an integer."""
    raw = values.get(name)
    if raw is None:
        return default
    try:
        value: float = int(raw.strip()) if isinstance(default, int) else float(raw.strip())
    except ValueError:
        raise BrokerConfigError(name, f"{raw!r} is not a number") from None
    if not value >= minimum:
        raise BrokerConfigError(name, f"{value} is below the minimum {minimum}")
    return value


class LogCleanerShell:
    """The cleaner task of one broker (see the module docstring)."""

    def __init__(
        self,
        config: CleanerConfig,
        source: LogSource,
        clock: Clock,
        metrics: LogCleanerMetrics | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._metrics = metrics
        self._last_clean_time_ms = 0  # the worker's last cleaning, start to end
        self._stopping = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None  # made on the loop, by run()
        self._worker: asyncio.Future[CleaningResult | None] | None = None
        self._throttler = Throttler(config.max_io_bytes_per_second, clock.monotonic_ms())
        self.cleaner = LogCleaner(
            config, source, check_done=self._check_done, run_on_log=self._run_on_log
        )
        self.rounds = 0
        self.cleanings = 0

    async def run(self) -> None:
        """Clean rounds until stopped; back off when nothing is cleanable."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        while not self._stopping.is_set():
            self._worker = asyncio.ensure_future(asyncio.to_thread(self._round))
            result = await self._worker
            self.rounds += 1
            self._record_round(result)
            if result is None:
                await self._clock.wait(self._stopped, self.config.backoff_ms)
            else:
                self.cleanings += 1

    async def stop(self) -> None:
        """Abort the cleaning in progress at its next batch and wait for the worker."""
        self._stopping.set()
        if self._stopped is not None:
            self._stopped.set()
        if self._worker is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(self._worker)

    def _record_round(self, result: CleaningResult | None) -> None:
        if self._metrics is None:
            return
        self._metrics.record_round(
            max_dirty_ratio=self.cleaner.max_dirty_ratio,
            uncleanable=self.cleaner.uncleanable_partitions_count(),
            cleaned=None if result is None else result.stats,
            clean_time_ms=self._last_clean_time_ms,
        )

    def _round(self) -> CleaningResult | None:
        started_ms = self._clock.monotonic_ms()
        try:
            result = self.cleaner.clean_filthiest(self._clock.wall_clock_ms())
            if result is not None:
                self._last_clean_time_ms = self._clock.monotonic_ms() - started_ms
            return result
        except CleaningAbortedError:
            return None
        except Exception:  # a bug: the broker goes on, the cleaner backs off and tries again
            logger.exception("the log cleaner's round failed")
            return None

    def _check_done(self, moved_bytes: int) -> None:
        if self._stopping.is_set():
            raise CleaningAbortedError("the broker is stopping")
        sleep_ms = self._throttler.maybe_throttle(moved_bytes, self._clock.monotonic_ms())
        if sleep_ms and self._stopping.wait(sleep_ms / 1000):
            raise CleaningAbortedError("the broker is stopping")

    def _run_on_log(self, function: Callable[[], Any]) -> Any:
        """Run ``function`` on the event loop, from the worker, and wait for its answer."""
        loop = self._loop
        assert loop is not None, "run() started the worker"

        async def call() -> Any:
            if self._stopping.is_set():
                raise CleaningAbortedError("the broker is stopping")
            return function()

        future = asyncio.run_coroutine_threadsafe(call(), loop)
        while True:
            try:
                return future.result(timeout=LOOP_CALL_POLL_S)
            except concurrent.futures.TimeoutError:
                if self._stopping.is_set():
                    future.cancel()
                    raise CleaningAbortedError("the broker is stopping") from None
