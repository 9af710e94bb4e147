"""The web console with 10,000 partitions (issue 16): milliseconds to build and render a page.

Pure work only (the view models and the HTML, ``quorum/console_views.py`` and
``console_html.py``), on two shapes of 10,000 partitions: 10,000 single-partition topics (the
topic list pages them; measured with its rows computed, and kept as the shell keeps them while
the topics do not change) and one topic of 10,000 partitions (its page lists 500 at a time). The
brokers' answers (ListOffsets, groups) are network time and not measured here. The peer in the
same run: the same 10,000 topic rows serialized as one JSON answer (``topics_page_to_json_peer``
is the topics page's time over it). Ends with one JSON line of figures: the median of ``--runs``
runs per page.

    python -m bench.console [--partitions 10000] [--runs 20]

Measured on the 2-core CI machine while other work ran (2026-11): the topics page of 10,000
single-partition topics 95-155 ms with its rows computed, ~40 ms with them kept; the overview
140-200 ms cold; a 10,000-partition topic's page (500 rows) ~9 ms; the brokers page ~20 ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterable

import attrs
from immutables import Map

from pykraft.metadata.image import (
    BrokerRegistration,
    ClusterImage,
    MetadataImage,
    PartitionRegistration,
    TopicImage,
    TopicsImage,
)
from pykraft.quorum import console_html, console_views

BROKERS = 3


def _image(topics: list[TopicImage]) -> MetadataImage:
    brokers = {b: BrokerRegistration(id=b, epoch=1, incarnation_id=str(b), fenced=False)
               for b in range(BROKERS)}  # fmt: skip
    return MetadataImage(
        cluster=ClusterImage(brokers=Map(brokers)),
        topics=TopicsImage(
            by_id=Map({t.topic_id: t for t in topics}), by_name=Map({t.name: t for t in topics})
        ),
    )


def _partition(index: int) -> PartitionRegistration:
    replicas = tuple((index + r) % BROKERS for r in range(BROKERS))
    isr = replicas if index % 10 else replicas[:2]  # every tenth under-replicated
    return PartitionRegistration(replicas=replicas, isr=isr, leader=replicas[0])


def _median_ms(work: Callable[[], str], runs: int) -> float:
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        timings.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(timings), 2)


def measure(partitions: int, runs: int) -> dict[str, float]:
    many = _image(
        [TopicImage(name=f"topic-{i:05}", topic_id=f"id{i}", partitions=Map({0: _partition(i)}))
         for i in range(partitions)]
    )  # fmt: skip
    wide_topic = TopicImage(
        name="wide", topic_id="wide", partitions=Map({i: _partition(i) for i in range(partitions)})
    )
    wide = _image([wide_topic])
    pages = partitions // console_views.PARTITIONS_PER_PAGE or 1

    def everything(names: Iterable[str]) -> set[str]:
        return set(names)

    def topics_page() -> str:
        listing = console_views.topic_page(many, everything, page=1)
        return console_html.page("Topics", "/console/topics", console_html.topics(listing))

    kept = console_views.topic_rows(many.topics)

    def topics_page_kept() -> str:
        listing = console_views.topic_page(many, everything, page=1, rows=kept)
        return console_html.page("Topics", "/console/topics", console_html.topics(listing))

    def overview_page() -> str:
        listing = console_views.topic_page(many, everything)
        body = console_html.overview((), console_views.broker_rows(many), listing, 0)
        return console_html.page("Overview", "/console", body)

    def wide_topic_page() -> str:
        rows = console_views.partition_rows(wide_topic, page=1)
        return console_html.page("Topic", "/console/topics", console_html.topic(
            "wide", "wide", rows, 1, pages))  # fmt: skip

    def wide_brokers_page() -> str:
        return console_html.brokers_table(console_views.broker_rows(wide))

    def topics_json_peer() -> str:
        # The peer: every topic's row put in a JSON answer, as a JSON listing would send it —
        # the least a page about these topics could cost in Python.
        return json.dumps(
            [attrs.astuple(row) for row in console_views.topic_rows(many.topics).values()]
        )

    topics_ms = _median_ms(topics_page, runs)
    peer_ms = _median_ms(topics_json_peer, runs)
    return {
        "partitions": partitions,
        "topics_page_ms": topics_ms,
        "topics_json_peer_ms": peer_ms,
        "topics_page_to_json_peer": round(topics_ms / peer_ms, 2) if peer_ms else 0.0,
        "topics_page_rows_kept_ms": _median_ms(topics_page_kept, runs),
        "overview_page_ms": _median_ms(overview_page, runs),
        "wide_topic_page_ms": _median_ms(wide_topic_page, runs),
        "brokers_page_ms": _median_ms(wide_brokers_page, runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.partitions, args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
