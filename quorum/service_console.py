"""The web console's routes (issue 16): HTML pages on the controller's HTTP port, read-only.

Each handler gathers its inputs — the committed image (``node.view``), pysyncobj's status, the
retained window, and what the brokers answer over the Kafka protocol (``console_kafka.Probes``:
the console's own small thread pool, one long-lived client, a cap, one deadline per page,
concurrent loads of a page merged) — and hands them to the pure ``console_views``,
``console_journal`` and ``console_html``. Every page is behind the API's doors
(``service_http.add_routes`` → ``auth_http.guard``): on a secure cluster an anonymous browser
gets 401 with a Basic challenge, the topic pages show only the topics the caller may DESCRIBE,
a group's page needs DESCRIBE on the group, and rows of topics the caller may not DESCRIBE are
dropped from the group pages and the journal. Nothing here writes.

A page whose brokers cannot be asked (none running, no PLAINTEXT listener, the deadline, the
console busy) still renders what the controller knows, with a note saying why the rest is
missing. The brokers page asks no broker: its live rates come from the counters the brokers
send with their heartbeats, kept by the active controller (``quorum/broker_rates.py``); a
standby's page says so and links to the active controller's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs
from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.errors import ErrorBody
from pykraft.metadata.auth.images import AclsImage
from pykraft.metadata.image import MetadataImage, TopicsImage
from pykraft.quorum import console_html, console_journal, console_views
from pykraft.quorum.auth_http import principal_of, require_group, visible_topics
from pykraft.quorum.console_kafka import (
    Budget,
    Probe,
    ProbeError,
    Probes,
    group_partitions,
)
from pykraft.quorum.service_http import ErrorAnswer, add_routes, node_of
from pykraft.quorum.service_quorum import quorum_description, raft_status

PROBES_KEY = web.AppKey("console_probes", Probes)


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
MAX_VISIBLE_SETS = 32


@attrs.define
class VisibleTopicsCache:
    """The topics each (principal, host) may DESCRIBE, kept while the ACL image and the topics
    image are the same objects (10,000 topics and 50 ACLs cost ~80 ms per load otherwise)."""

    images: tuple[AclsImage, TopicsImage] | None = None
    sets: dict[tuple[str, str], frozenset[str]] = attrs.field(factory=dict)

    def of(
        self, image: MetadataImage, who: tuple[str, str], ask: Callable[[Iterable[str]], set[str]]
    ) -> frozenset[str]:
        images = (image.acls, image.topics)
        if (
            self.images is None
            or self.images[0] is not images[0]
            or self.images[1] is not images[1]
        ):
            self.images, self.sets = images, {}
        found = self.sets.get(who)
        if found is None:
            if len(self.sets) >= MAX_VISIBLE_SETS:
                self.sets.pop(next(iter(self.sets)))
            found = self.sets[who] = frozenset(ask(image.topics.by_name.keys()))
        return found


VISIBLE_KEY = web.AppKey("console_visible_topics", VisibleTopicsCache)


def _visible(request: web.Request, image: MetadataImage) -> frozenset[str]:
    who = (str(principal_of(request)), request.remote or "")
    return request.app[VISIBLE_KEY].of(image, who, lambda names: visible_topics(request, names))


def _html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html", charset="utf-8")


def _page_number(request: web.Request) -> int:
    try:
        return max(1, int(request.query.get("page", "1")))
    except ValueError:
        return 1


def _notes(notes: Iterable[str]) -> str:
    return "".join(console_html.note(text) for text in notes)


def _render(request: web.Request, title: str, active: str, body: str) -> web.Response:
    cluster_id = node_of(request).config.cluster_id or ""
    return _html(console_html.page(title, active, body, cluster_id))


async def overview(request: web.Request) -> web.Response:
    node = node_of(request)
    image = node.view.image
    quorum = quorum_description(node, await raft_status(node))
    visible = _visible(request, image)
    body = console_html.overview(
        console_views.controller_rows(quorum),
        console_views.broker_rows(image),
        console_views.topic_page(
            image,
            lambda names: set(visible.intersection(names)),
            rows=request.app[TOPIC_ROWS_KEY].rows_of(image),
        ),
        image.offset,
    )
    return _render(request, "Cluster overview", console_html.PREFIX, body)


async def brokers(request: web.Request) -> web.Response:
    """The brokers with their live rates, from the heartbeats the active controller received
    (``node.broker_rates``): no broker is asked anything. A rate is "-" until a broker's second
    heartbeat with counters, and once its last heartbeat is older than its session timeout."""
    node = node_of(request)
    image = node.view.image
    if node.is_leader():
        now_ms = node.clock.monotonic_ms()
        rates = node.broker_rates.all_rates(now_ms, node.config.broker_session_timeout_ms)
        notes = _notes([] if rates else ["Rates appear after a broker's second heartbeat."])
    else:  # a standby's samples are none or from an old leadership: none shown
        rates, notes = {}, console_html.rates_elsewhere_note(node.leader_url())
    body = notes + console_html.brokers_table(console_views.broker_rows(image, rates))
    return _render(request, "Brokers", f"{console_html.PREFIX}/brokers", body)


async def topics(request: web.Request) -> web.Response:
    image = node_of(request).view.image
    visible = _visible(request, image)
    listing = console_views.topic_page(
        image,
        lambda names: set(visible.intersection(names)),
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
    asked = [(name, r.partition) for r in shown]
    ends: dict[int, int] = {}
    try:
        answered, notes = await request.app[PROBES_KEY].ask(
            ("topic", name, current),
            image,
            lambda probe, budget: probe.log_end_offsets(asked, budget),
        )
        ends = {index: offset for (_, index), offset in answered.items()}
    except ProbeError as error:
        notes = [f"Log end offsets unavailable: {error}"]
    rows = console_views.partition_rows(found, ends, page=current)
    body = _notes(notes) + console_html.topic(name, found.topic_id, rows, current, pages)
    return _render(request, f"Topic {name}", f"{console_html.PREFIX}/topics", body)


GroupAnswer = tuple[str, tuple[console_views.Member, ...], tuple[console_views.GroupOffsetRow, ...]]


def _describe_groups(
    probe: Probe, budget: Budget, listed: list[tuple[str, str]]
) -> dict[str, GroupAnswer]:
    """Every group of ``listed`` described at once, their offsets asked together, then one
    ListOffsets for all their partitions; a group not described (or whose offsets did not
    arrive) by the deadline is absent, with a note on the budget."""
    names = [group for group, _ in listed]
    described = probe.describe_groups(names, budget)
    committed = probe.committed(names, budget)
    wanted: set[tuple[str, int]] = set()
    for group in names:
        members = described.get(group, ("", ()))[1]
        wanted |= group_partitions(members, committed.get(group, {}))
    ends = probe.log_end_offsets(sorted(wanted), budget)
    return {
        group: (state, members, console_views.group_offset_rows(members, committed[group], ends))
        for group, (state, members) in described.items()
        if group in committed
    }


def _shown(
    rows: Iterable[console_views.GroupOffsetRow], visible: frozenset[str]
) -> tuple[console_views.GroupOffsetRow, ...]:
    return tuple(row for row in rows if row.topic in visible)


async def groups(request: web.Request) -> web.Response:
    if "group" in request.query:  # a group id a path cannot carry ("." and "..")
        return await _group_page(request, request.query["group"], checked=False)
    image = node_of(request).view.image
    current = _page_number(request)

    def describe_page(
        probe: Probe, budget: Budget
    ) -> tuple[int, list[tuple[str, str]], dict[str, GroupAnswer]]:
        listed = probe.list_groups(budget)
        per_page = console_views.GROUPS_PER_PAGE
        pages = console_views.page_count(len(listed), per_page)
        page = min(current, pages)
        shown = listed[(page - 1) * per_page : page * per_page]
        return pages, shown, _describe_groups(probe, budget, shown)

    try:
        (pages, listed, answers), notes = await request.app[PROBES_KEY].ask(
            ("groups", current), image, describe_page
        )
    except ProbeError as error:
        body = console_html.note(f"Consumer groups unavailable: {error}")
    else:
        visible = _visible(request, image)
        rows = []
        for group_id, listed_state in listed:
            if group_id not in answers:  # not described in time: what ListGroups said
                rows.append(console_views.GroupRow(group_id, listed_state, 0, None, known=False))
                continue
            state, members, offsets = answers[group_id]
            lag = console_views.total_lag(_shown(offsets, visible))
            rows.append(console_views.GroupRow(group_id, state, len(members), lag))
        body = _notes(notes) + console_html.groups(rows, min(current, pages), pages)
    return _render(request, "Consumer groups", f"{console_html.PREFIX}/groups", body)


async def group(request: web.Request) -> web.Response:
    return await _group_page(request, request.match_info["group"], checked=True)


async def _group_page(request: web.Request, group_id: str, *, checked: bool) -> web.Response:
    if not checked:
        require_group(request, "DESCRIBE", group_id)
    image = node_of(request).view.image

    def describe(probe: Probe, budget: Budget) -> GroupAnswer:
        answer = _describe_groups(probe, budget, [(group_id, "?")])
        if group_id not in answer:
            raise ProbeError(budget.notes[0] if budget.notes else "The group was not described.")
        return answer[group_id]

    try:
        (state, _, rows), notes = await request.app[PROBES_KEY].ask(
            ("group", group_id), image, describe
        )
        shown = _shown(rows, _visible(request, image))
        body = _notes(notes) + console_html.group(state, shown)
    except ProbeError as error:
        body = console_html.note(f"Consumer group unavailable: {error}")
    return _render(request, f"Consumer group {group_id}", f"{console_html.PREFIX}/groups", body)


async def journal(request: web.Request) -> web.Response:
    node = node_of(request)
    window = node.view.window
    image = node.view.image
    no_ops = request.query.get("noop") == "1"
    scan = console_journal.JOURNAL_SCAN_RECORDS if not no_ops else console_journal.JOURNAL_RECORDS
    start = max(window.start_offset, window.next_offset - scan)
    read = window.read(start, scan)
    visible = _visible(request, image)
    listing = console_journal.journal_rows(
        [(b.base_offset, b.epoch, b.append_time_ms, b.records) for b in read.batches],
        no_ops=no_ops,
        visible=visible.__contains__,
        topic_names={topic_id: t.name for topic_id, t in image.topics.by_id.items()},
    )
    notes = ""
    if listing.hidden:
        notes = console_html.note(
            f"{listing.hidden:,} records about topics you may not DESCRIBE are not shown."
        )
    body = notes + console_html.journal(
        listing.rows, window.start_offset, window.next_offset, no_ops
    )
    return _render(request, "Metadata journal", f"{console_html.PREFIX}/journal", body)


async def _close_probes(app: web.Application) -> None:
    app[PROBES_KEY].close()


def add_console_routes(
    app: web.Application, monotonic_ms: Callable[[], int], probes: Probes | None = None
) -> None:
    """``monotonic_ms``: the controller's clock, for the probes' deadlines and cache."""
    app[PROBES_KEY] = probes or Probes(monotonic_ms)
    app[TOPIC_ROWS_KEY] = TopicRowsCache()
    app[VISIBLE_KEY] = VisibleTopicsCache()
    app.on_cleanup.append(_close_probes)
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
