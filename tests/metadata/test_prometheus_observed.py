"""What histograms and summaries share (``_ObservedFamily``): a series per label set made on
its first observation, ``count()`` of one, label sets rendered in sorted order each ending in
``_sum`` then ``_count``, and the bound on label sets."""

from __future__ import annotations

import pytest

from pykraft.metadata.prometheus import Histogram, Summary


@pytest.mark.parametrize(
    "family",
    [Histogram("h_seconds", "h", ["api"], buckets=[1.0]), Summary("h_seconds", "h", ["api"])],
    ids=["histogram", "summary"],
)
def test_each_label_set_counts_and_sums_apart(family: Histogram | Summary) -> None:
    assert family.count("Fetch") == 0  # never observed: no series made
    family.observe(0.5, "Produce")
    family.observe(2.0, "Fetch")
    family.observe(0.25, "Fetch")
    assert (family.count("Fetch"), family.count("Produce")) == (2, 1)
    totals = [line for line in family.samples() if "_sum" in line or "_count" in line]
    assert totals == [
        'h_seconds_sum{api="Fetch"} 2.25',
        'h_seconds_count{api="Fetch"} 2',
        'h_seconds_sum{api="Produce"} 0.5',
        'h_seconds_count{api="Produce"} 1',
    ]


def test_a_histogram_counts_every_observation_in_exactly_one_bucket() -> None:
    histogram = Histogram("h_seconds", "h", buckets=[1.0, 2.0])
    for value in (0.5, 1.0, 1.5, 3.0, 3.0):
        histogram.observe(value)
    assert list(histogram.samples())[:3] == [
        'h_seconds_bucket{le="1.0"} 2',
        'h_seconds_bucket{le="2.0"} 3',
        'h_seconds_bucket{le="+Inf"} 5',
    ]


def test_a_nan_observation_falls_in_the_inf_bucket_only() -> None:
    histogram = Histogram("h_seconds", "h", buckets=[1.0, 2.0])
    histogram.observe(float("nan"))
    assert list(histogram.samples())[:3] == [
        'h_seconds_bucket{le="1.0"} 0',
        'h_seconds_bucket{le="2.0"} 0',
        'h_seconds_bucket{le="+Inf"} 1',
    ]


@pytest.mark.parametrize("make", [Histogram, Summary], ids=["histogram", "summary"])
def test_label_sets_are_bounded(make: type[Histogram] | type[Summary]) -> None:
    family = make("h_seconds", "h", ["api"])
    family.max_series = 2
    family.observe(1.0, "a")
    family.observe(1.0, "b")
    family.observe(1.0, "a")  # a known label set still records
    with pytest.raises(AssertionError, match="more than 2 label sets"):
        family.observe(1.0, "c")
