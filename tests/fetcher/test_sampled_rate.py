"""The sampled rates shared by client quotas and replication throttles: Kafka's ``SampledStat``
with ``Rate.windowSize`` and ``SimpleRate.windowSize`` (mirrors MetricsTest.testRateWindowing,
testSimpleRate and testOldDataHasNoEffect)."""

from __future__ import annotations

import pytest

from pykraft.fetcher.sampled_rate import Rate, SimpleRate


def test_a_fresh_rate_spreads_its_first_burst_over_all_but_one_window() -> None:
    # Rate.windowSize: at least samples - 1 full windows.
    rate = Rate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == pytest.approx(100.0)
    assert rate.window_size_ms(10_500) == 10_500  # past the minimum: the real span


def test_a_fresh_simple_rate_divides_by_one_window() -> None:
    rate = SimpleRate(samples=11, window_ms=1000)
    rate.record(1000, 0)
    assert rate.measure(0) == pytest.approx(1000.0)
    assert rate.measure(4000) == pytest.approx(250.0)


def test_the_ring_keeps_the_last_samples_windows() -> None:
    # testRateWindowing: a sample a window old is complete; the next slot begins at the record.
    rate = SimpleRate(samples=2, window_ms=1000)
    for at_ms in (0, 1000, 2000):
        rate.record(100, at_ms)
    # The sample begun at 0 was reused at 2000: 200 bytes since 1000.
    assert rate.total(2000) == pytest.approx(200.0)
    assert rate.window_size_ms(2000) == 1000


def test_old_data_has_no_effect() -> None:
    # purgeObsoleteSamples: a sample as old as all the windows together counts no more.
    rate = Rate(samples=2, window_ms=1000)
    rate.record(1000, 0)
    assert rate.total(1999) == pytest.approx(1000.0)
    assert rate.total(2000) == 0.0
    assert rate.measure(2000) == 0.0


def test_measuring_opens_no_sample_and_open_does() -> None:
    rate = SimpleRate(samples=11, window_ms=1000)
    assert rate.measure(5000) == 0.0
    rate.record(1000, 9000)
    assert rate.window_size_ms(9000) == 1000  # the read at 5000 did not start the window
    opened = SimpleRate(samples=11, window_ms=1000)
    opened.open(5000)
    opened.record(1000, 9000)
    assert opened.window_size_ms(9000) == 4000  # measured from the first check
    assert opened.measure(9000) == pytest.approx(250.0)


def test_negative_values_take_back_a_recording() -> None:
    # ClientQuotaManager.unrecordQuotaSensor records -value.
    rate = Rate(samples=11, window_ms=1000)
    rate.record(500, 0)
    rate.record(-500, 10)
    assert rate.total(10) == 0.0


@pytest.mark.parametrize(("samples", "window_ms"), [(0, 1000), (2, 0)])
def test_bad_windows_are_bugs(samples: int, window_ms: int) -> None:
    with pytest.raises(AssertionError):
        Rate(samples=samples, window_ms=window_ms)
