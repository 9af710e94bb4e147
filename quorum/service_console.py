"""The web console's routes (issue 16): HTML pages on the controller's HTTP port, read-only.

Each handler gathers its inputs — the committed image (``node.view``), pysyncobj's status, the
retained window, and what the brokers answer over the Kafka protocol (``console_kafka.Probe``,
in a worker thread) — and hands them to the pure ``console_views`` and ``console_html``. Every
page is behind the API's doors (``service_http.add_routes`` → ``auth_http.guard``): on a secure
cluster an anonymous browser gets 401 with a Basic challenge, and the topic pages show only the
topics the caller may DESCRIBE. Nothing here writes.

A page whose brokers cannot be asked (none running, no PLAINTEXT listener, a timeout) still
renders what the controller knows, with a note saying why the rest is missing. The rate sampler
(``RATES_KEY``) keeps the last counters of the brokers page so the next load shows per-second
rates; its arithmetic is ``console_views.rates_per_s``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import attrs
from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.errors import ErrorBody
from pykraft.metadata.image import MetadataImage, TopicsImage
from pykraft.quorum import console_html, console_views
from pykraft.quorum.auth_http import visible_topics
from pykraft.quorum.console_kafka import (
    Probe,
    ProbeError,
    all_partitions,
    bootstrap_servers,
    group_partitions,
)
from pykraft.quorum.service_http import ErrorAnswer, add_routes, node_of
from pykraft.quorum.service_quorum import quorum_description, raft_status

T = TypeVar("T")
PROBE_TIMEOUT_S = 3.0


@attrs.define
class RateSampler:
    """The last samples of the two counters the brokers page turns into rates."""

    appended: console_views.RateSample | None = None
    consumed: console_views.RateSample | None = None


RATES_KEY = web.AppKey("console_rates", RateSampler)


@attrs.define
class TopicRowsCache:
    """``console_views.topic_rows`` of the last ``TopicsImage`` seen (one entry): with 10,000
    partitions the pass costs ~100 ms, and the image's topics rarely change between loads."""

    topics: TopicsImage | None = None
    rows: dict[str, console_views.TopicRow] = attrs.field(factory=dict)

    def rows_of(self, image: MetadataImage) -> dict[str, console_views.TopicRow]:
        if image.topics is not self.topics:
            self.topics, self.rows = image.topics, console_views.topic_rows(image.topics)
        return self.rows


TOPIC_ROWS_KEY = web.AppKey("console_topic_rows", TopicRowsCache)


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8")


def _page_number(request: web.Request) -> int:
    try:
        return max(1, int(request.query.get("page", "1")))
    except ValueError:
        return 1


def _render(request: web.Request, title: str, active: str, body: str) -> web.Response:
    cluster_id = node_of(request).config.cluster_id or ""
    return _html(console_html.page(title, active, body, cluster_id))


async def _ask(image: MetadataImage, work: Callable[[Probe], T]) -> T:
    """``work`` on a fresh Probe in a worker thread; ProbeError says why it failed."""
    bootstrap = bootstrap_servers(image)

    def run() -> T:
        return work(Probe(bootstrap, PROBE_TIMEOUT_S))

    return await asyncio.to_thread(run)


async def overview(request: web.Request) -> web.Response:
    node = node_of(request)
    image = node.view.image
    quorum = quorum_description(node, await raft_status(node))
    body = console_html.overview(
        console_views.controller_rows(quorum),
        console_views.broker_rows(image),
        console_views.topic_page(
            image,
            lambda names: visible_topics(request, names),
            rows=request.app[TOPIC_ROWS_KEY].rows_of(image),
        ),
        image.offset,
    )
    return _render(request, "Cluster overview", console_html.PREFIX, body)


async def brokers(request: web.Request) -> web.Response:
    node = node_of(request)
    image = node.view.image
    sampler = request.app[RATES_KEY]
    now_ms = node.clock.monotonic_ms()
    notes = ""

    def sample(probe: Probe) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
        groups = [group for group, _ in probe.list_groups()]
        return probe.log_end_offsets(all_partitions(image)), probe.committed_totals(groups)

    appended_rates: dict[int, float] = {}
    consumed_rates: dict[int, float] = {}
    try:
        ends, committed = await _ask(image, sample)
    except ProbeError as error:
        notes = console_html.note(f"Rates unavailable: {error}")
    else:
        appended = console_views.RateSample(now_ms, console_views.counters_by_leader(image, ends))
        consumed = console_views.RateSample(
            now_ms, console_views.counters_by_leader(image, committed)
        )
        appended_rates = console_views.rates_per_s(sampler.appended, appended)
        consumed_rates = console_views.rates_per_s(sampler.consumed, consumed)
        sampler.appended, sampler.consumed = appended, consumed
        if not appended_rates:
            notes = console_html.note("Rates appear from the next refresh on.")
    rows = console_views.broker_rows(image, appended_rates, consumed_rates)
    body = notes + console_html.brokers_table(rows)
    return _render(request, "Brokers", f"{console_html.PREFIX}/brokers", body)


async def topics(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    listing = console_views.topic_page(
        image,
        lambda names: visible_topics(request, names),
        _page_number(request),
        rows=request.app[TOPIC_ROWS_KEY].rows_of(image),
    )
    body = console_html.topics(listing)
    return _render(request, "Topics", f"{console_html.PREFIX}/topics", body)


async def topic(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    name = request.match_info["name"]
    found = image.topics.by_name.get(name)
    if found is None:
        raise ErrorAnswer(
            404,
            ErrorBody(
                error="UNKNOWN_TOPIC_OR_PARTITION", message=f"Topic {name!r} does not exist."
            ),
        )
    pages = console_views.page_count(len(found.partitions), console_views.PARTITIONS_PER_PAGE)
    current = min(_page_number(request), pages)
    shown = console_views.partition_rows(found, page=current)
    notes = ""
    ends: dict[int, int] = {}
    try:
        answered = await _ask(
            image, lambda probe: probe.log_end_offsets([(name, r.partition) for r in shown])
        )
        ends = {index: offset for (_, index), offset in answered.items()}
    except ProbeError as error:
        notes = console_html.note(f"Log end offsets unavailable: {error}")
    rows = console_views.partition_rows(found, ends, page=current)
    body = notes + console_html.topic(name, found.topic_id, rows, current, pages)
    return _render(request, f"Topic {name}", f"{console_html.PREFIX}/topics", body)


async def groups(request: web.Request) -> web.Response:
    image = node_of(request).view.image

    def describe_all(probe: Probe) -> list[console_views.GroupRow]:
        rows = []
        for group, state in probe.list_groups()[: console_views.TOPICS_PER_PAGE]:
            _, members = probe.describe_group(group)
            committed = probe.committed(group)
            ends = probe.log_end_offsets(sorted(group_partitions(members, committed)))
            offsets = console_views.group_offset_rows(members, committed, ends)
            rows.append(
                console_views.GroupRow(group, state, len(members), console_views.total_lag(offsets))
            )
        return rows

    try:
        body = console_html.groups(await _ask(image, describe_all))
    except ProbeError as error:
        body = console_html.note(f"Consumer groups unavailable: {error}")
    return _render(request, "Consumer groups", f"{console_html.PREFIX}/groups", body)


async def group(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    group_id = request.match_info["group"]

    def describe(probe: Probe) -> tuple[str, tuple[console_views.GroupOffsetRow, ...]]:
        state, members = probe.describe_group(group_id)
        committed = probe.committed(group_id)
        ends = probe.log_end_offsets(sorted(group_partitions(members, committed)))
        return state, console_views.group_offset_rows(members, committed, ends)

    try:
        state, rows = await _ask(image, describe)
        body = console_html.group(state, rows)
    except ProbeError as error:
        body = console_html.note(f"Consumer group unavailable: {error}")
    return _render(request, f"Consumer group {group_id}", f"{console_html.PREFIX}/groups", body)


async def journal(request: web.Request) -> web.Response:
    window = node_of(request).view.window
    no_ops = request.query.get("noop") == "1"
    scan = console_views.JOURNAL_SCAN_RECORDS if not no_ops else console_views.JOURNAL_RECORDS
    start = max(window.start_offset, window.next_offset - scan)
    read = window.read(start, scan)
    rows = console_views.journal_rows(
        ((b.base_offset, b.epoch, b.append_time_ms, b.records) for b in read.batches),
        no_ops=no_ops,
    )
    body = console_html.journal(rows, window.start_offset, window.next_offset, no_ops)
    return _render(request, "Metadata journal", f"{console_html.PREFIX}/journal", body)


def add_console_routes(app: web.Application) -> None:
    app[RATES_KEY] = RateSampler()
    app[TOPIC_ROWS_KEY] = TopicRowsCache()
    add_routes(
        app,
        [
            (routes.CONSOLE_OVERVIEW, overview),
            (routes.CONSOLE_BROKERS, brokers),
            (routes.CONSOLE_TOPICS, topics),
            (routes.CONSOLE_TOPIC, topic),
            (routes.CONSOLE_GROUPS, groups),
            (routes.CONSOLE_GROUP, group),
            (routes.CONSOLE_JOURNAL, journal),
        ],
    )
