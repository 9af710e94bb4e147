"""The web console's HTML: server-rendered pages from ``console_views`` rows (pure functions).

Why server-rendered HTML and not a built JavaScript bundle: the pages are tables of values the
controller already holds; rendering them where the data is costs one request per page, no
JSON API to keep in step with a client, no build step, no node_modules in the repository, and
every page works with JavaScript off. The little JavaScript there is (``_REFRESH``) reloads the
page every ``REFRESH_SECONDS`` (or ``?refresh=N``) while "auto-refresh" is ticked, remembered in
``localStorage``.

Every value goes through ``_e`` (``html.escape``, quotes too): topic names, group ids, client ids
and record fields are chosen by clients and must never become markup.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from pykraft.quorum.console_journal import JournalRow
from pykraft.quorum.console_views import (
    BrokerRow,
    ControllerRow,
    GroupOffsetRow,
    GroupRow,
    PartitionRow,
    TopicPage,
    TopicRow,
)

PREFIX = "/console"
# Auto-refresh period; ``?refresh=N`` on any page asks for N seconds (1 to the maximum).
REFRESH_SECONDS = 5
MAX_REFRESH_SECONDS = 300
NAV = (
    ("Overview", PREFIX),
    ("Brokers", f"{PREFIX}/brokers"),
    ("Topics", f"{PREFIX}/topics"),
    ("Consumer groups", f"{PREFIX}/groups"),
    ("Journal", f"{PREFIX}/journal"),
)

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2430;
background:#f5f7fa}
header{background:#1f3147;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:center}
header b{font-size:16px;margin-right:16px}
header a{color:#c9d6e6;text-decoration:none}header a.on{color:#fff;font-weight:600}
header label{margin-left:auto;font-size:12px;color:#c9d6e6}
main{padding:16px 24px}main a{color:#1f5fa8}
h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px;margin:20px 0 8px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 2px #0002;margin-bottom:12px}
th,td{padding:5px 10px;border-bottom:1px solid #e3e8ef;text-align:left;white-space:nowrap}
th{background:#eef2f7;font-weight:600;font-size:12px;text-transform:uppercase;color:#4a5568}
td.n{text-align:right;font-variant-numeric:tabular-nums}
td.j{white-space:normal;font-family:ui-monospace,monospace;font-size:12px;max-width:900px;
overflow-wrap:anywhere}
.bad{color:#b42318;font-weight:600}.ok{color:#067647}.muted{color:#718096}
.cards{display:flex;gap:12px;margin-bottom:8px}
.card{background:#fff;box-shadow:0 1px 2px #0002;padding:10px 16px;min-width:120px}
.card .v{font-size:22px;font-weight:600}.card .k{font-size:12px;color:#718096}
.note{background:#fff8e6;border-left:3px solid #f0b429;padding:6px 12px;margin:8px 0}
"""

_REFRESH = f"""
<script>
(function () {{
  var box = document.getElementById("refresh");
  box.checked = localStorage.getItem("console.refresh") !== "off";
  box.addEventListener("change", function () {{
    localStorage.setItem("console.refresh", box.checked ? "on" : "off");
  }});
  var asked = parseInt(new URLSearchParams(location.search).get("refresh"), 10);
  var seconds = Math.min({MAX_REFRESH_SECONDS}, Math.max(1, asked || {REFRESH_SECONDS}));
  setInterval(function () {{ if (box.checked) location.reload(); }}, seconds * 1000);
}})();
</script>
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _opt(value: int | float | None, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _ids(ids: Iterable[int]) -> str:
    return ",".join(str(i) for i in ids)


def topic_href(name: str) -> str:
    return f"{PREFIX}/topics/{quote(name, safe='')}"


def group_href(group: str) -> str:
    """A group's page. The ids "." and ".." cannot be a path segment (a browser resolves them,
    encoded or not: the URL standard treats "%2e" as a dot), so they go as ``?group=``."""
    if group in (".", ".."):
        return f"{PREFIX}/groups?group={quote(group, safe='')}"
    return f"{PREFIX}/groups/{quote(group, safe='')}"


def page(title: str, active: str, body: str, cluster_id: str = "") -> str:
    links = "".join(
        f'<a href="{_e(href)}"{" class=on" if href == active else ""}>{_e(name)}</a>'
        for name, href in NAV
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)} · pykraft</title><style>{_STYLE}</style></head><body>"
        f"<header><b>pykraft {_e(cluster_id)}</b>{links}"
        '<label><input type="checkbox" id="refresh"> auto-refresh</label></header>'
        f"<main><h1>{_e(title)}</h1>{body}</main>{_REFRESH}</body></html>"
    )


# A column title, or (title, tooltip).
Header = str | tuple[str, str]


def _th(header: Header) -> str:
    if isinstance(header, str):
        return f"<th>{_e(header)}</th>"
    return f'<th title="{_e(header[1])}">{_e(header[0])}</th>'


def _table(headers: Sequence[Header], rows: Iterable[str], empty: str = "None.") -> str:
    body = "".join(rows)
    if not body:
        return f'<p class="muted">{_e(empty)}</p>'
    head = "".join(_th(h) for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cards(items: Sequence[tuple[str, object, bool]]) -> str:
    cards = "".join(
        f'<div class="card"><div class="v{" bad" if bad else ""}">{_e(value)}</div>'
        f'<div class="k">{_e(key)}</div></div>'
        for key, value, bad in items
    )
    return f'<div class="cards">{cards}</div>'


def note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def rates_elsewhere_note(leader_url: str | None) -> str:
    """A standby's brokers page: the rates live on the active controller."""
    text = "Rates are kept by the active controller, from the brokers' heartbeats"
    if leader_url is None:
        return note(f"{text}; none is active right now.")
    href = f"{leader_url.rstrip('/')}{PREFIX}/brokers"
    return f'<p class="note">{_e(text)}: <a href="{_e(href)}">its console</a>.</p>'


def controllers_table(rows: Sequence[ControllerRow]) -> str:
    return _table(
        ("Node", "Raft role", "Term", "Commit lag", "URL"),
        (
            f"<tr><td>{r.node_id}</td><td>{_e(r.role)}</td><td class=n>{_opt(r.raft_term)}</td>"
            f"<td class=n>{_opt(r.lag)}</td><td>{_e(r.url or '-')}</td></tr>"
            for r in rows
        ),
    )


_METER = "kafka.server:type=BrokerTopicMetrics,name="
# The rate columns: title, Kafka's metrics (all topics) as the tooltip, the BrokerRates fields
# shown ("a / b" for two), decimals. Replication in and out share a column so the table fits
# a 1280-pixel window.
RATE_COLUMNS: tuple[tuple[str, str, tuple[str, ...], int], ...] = (
    ("Msgs in /s", f"{_METER}MessagesInPerSec", ("messages_in",), 1),
    ("Bytes in /s", f"{_METER}BytesInPerSec", ("bytes_in",), 0),
    ("Bytes out /s", f"{_METER}BytesOutPerSec (consumer fetches)", ("bytes_out",), 0),
    (
        "Repl. in / out /s",
        f"{_METER}ReplicationBytesInPerSec / {_METER}ReplicationBytesOutPerSec",
        ("replication_bytes_in", "replication_bytes_out"),
        0,
    ),
    (
        "Fetches /s",
        "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch "
        "(consumer and follower fetches)",
        ("fetch_requests",),
        1,
    ),
)


def _rate_cells(r: BrokerRow) -> str:
    rates = r.rates
    return "".join(
        "<td class=n>"
        + " / ".join(_opt(None if rates is None else getattr(rates, f), digits) for f in fields)
        + "</td>"
        for _, _, fields, digits in RATE_COLUMNS
    )


def brokers_table(rows: Sequence[BrokerRow], rates: bool = True) -> str:
    """``rates``: the columns of the brokers' heartbeat rates (per second between a broker's
    last two heartbeats, ``quorum/broker_rates.py``), titled with Kafka's metric names."""
    headers: list[Header] = [
        *("Broker", "State", "Epoch", "Leaders", "Replicas", "Rack", "Endpoints")
    ]
    if rates:
        headers += [(title, tooltip) for title, tooltip, _, _ in RATE_COLUMNS]

    def row(r: BrokerRow) -> str:
        state = f'<span class="{"ok" if r.state == "RUNNING" else "bad"}">{_e(r.state)}</span>'
        cells = (
            f"<tr><td>{r.broker_id}</td><td>{state}</td><td class=n>{r.broker_epoch}</td>"
            f"<td class=n>{r.leaders:,}</td><td class=n>{r.replicas:,}</td><td>{_e(r.rack)}</td>"
            f"<td>{_e(r.endpoints)}</td>"
        )
        if rates:
            cells += _rate_cells(r)
        return cells + "</tr>"

    return _table(headers, (row(r) for r in rows), "No broker is registered.")


def overview(
    controllers: Sequence[ControllerRow],
    brokers: Sequence[BrokerRow],
    topics: TopicPage,
    metadata_offset: int,
) -> str:
    cards = _cards(
        (
            ("Brokers", len(brokers), False),
            ("Topics", f"{topics.topics:,}", False),
            ("Partitions", f"{topics.partitions:,}", False),
            ("Under-replicated", f"{topics.under_replicated:,}", topics.under_replicated > 0),
            ("Offline", f"{topics.offline:,}", topics.offline > 0),
            ("Metadata offset", f"{metadata_offset:,}", False),
        )
    )
    return (
        f"{cards}<h2>Controllers</h2>{controllers_table(controllers)}"
        f"<h2>Brokers</h2>{brokers_table(brokers, rates=False)}"
    )


def _topic_row(r: TopicRow) -> str:
    under = f'<span class="bad">{r.under_replicated:,}</span>' if r.under_replicated else "0"
    offline = f'<span class="bad">{r.offline:,}</span>' if r.offline else "0"
    return (
        f'<tr><td><a href="{_e(topic_href(r.name))}">{_e(r.name)}</a></td>'
        f"<td class=n>{r.partitions:,}</td><td class=n>{r.replication_factor}</td>"
        f"<td class=n>{under}</td><td class=n>{offline}</td></tr>"
    )


def _pager(base: str, current: int, pages: int) -> str:
    if pages <= 1:
        return ""
    links = []
    if current > 1:
        links.append(f'<a href="{_e(base)}?page={current - 1}">← previous</a>')
    links.append(f"page {current} of {pages}")
    if current < pages:
        links.append(f'<a href="{_e(base)}?page={current + 1}">next →</a>')
    return f"<p>{' · '.join(links)}</p>"


def topics(listing: TopicPage) -> str:
    cards = _cards(
        (
            ("Topics", f"{listing.topics:,}", False),
            ("Partitions", f"{listing.partitions:,}", False),
            ("Under-replicated", f"{listing.under_replicated:,}", listing.under_replicated > 0),
            ("Offline", f"{listing.offline:,}", listing.offline > 0),
        )
    )
    table = _table(
        ("Topic", "Partitions", "Replication factor", "Under-replicated", "Offline"),
        (_topic_row(r) for r in listing.rows),
        "No topic.",
    )
    return cards + table + _pager(f"{PREFIX}/topics", listing.page, listing.pages)


def topic(name: str, topic_id: str, rows: Sequence[PartitionRow], current: int, pages: int) -> str:
    def row(r: PartitionRow) -> str:
        mark = ""
        if r.offline:
            mark = '<span class="bad">offline</span>'
        elif r.under_replicated:
            mark = '<span class="bad">under-replicated</span>'
        return (
            f"<tr><td class=n>{r.partition}</td><td class=n>{r.leader}</td>"
            f"<td class=n>{r.leader_epoch}</td><td>{_ids(r.replicas)}</td><td>{_ids(r.isr)}</td>"
            f"<td class=n>{_opt(r.log_end_offset)}</td><td>{mark}</td></tr>"
        )

    table = _table(
        ("Partition", "Leader", "Leader epoch", "Replicas", "ISR", "Log end offset", ""),
        (row(r) for r in rows),
        "No partition.",
    )
    return (
        f'<p class="muted">Topic id {_e(topic_id)}</p>{table}'
        f"{_pager(topic_href(name), current, pages)}"
    )


def groups(rows: Sequence[GroupRow], current: int = 1, pages: int = 1) -> str:
    def row(r: GroupRow) -> str:
        members = str(r.members) if r.known else '<span class="bad">not described</span>'
        return (
            f'<tr><td><a href="{_e(group_href(r.group))}">{_e(r.group)}</a></td>'
            f"<td>{_e(r.state)}</td><td class=n>{members}</td><td class=n>{_opt(r.lag)}</td></tr>"
        )

    table = _table(
        ("Group", "State", "Members", "Lag"), (row(r) for r in rows), "No consumer group."
    )
    return table + _pager(f"{PREFIX}/groups", current, pages)


def group(state: str, rows: Sequence[GroupOffsetRow]) -> str:
    # Kafka's kafka-consumer-groups --describe columns.
    table = _table(
        (
            "Topic",
            "Partition",
            "Current-offset",
            "Log-end-offset",
            "Lag",
            "Consumer-id",
            "Host",
            "Client-id",
        ),
        (
            f'<tr><td><a href="{_e(topic_href(r.topic))}">{_e(r.topic)}</a></td>'
            f"<td class=n>{r.partition}</td><td class=n>{_offset(r.current_offset)}</td>"
            f"<td class=n>{_offset(r.log_end_offset)}</td><td class=n>{_lag(r)}</td>"
            f"<td>{_e(r.consumer_id)}</td><td>{_e(r.host)}</td><td>{_e(r.client_id)}</td></tr>"
            for r in rows
        ),
        "The group has no committed offset and no member.",
    )
    return f"<p>State: <b>{_e(state)}</b></p>{table}"


def _offset(value: int | None) -> str:
    """An offset; a negative one (librdkafka's -1001 "invalid") is unknown, "-"."""
    return "-" if value is None or value < 0 else _opt(value)


def _lag(row: GroupOffsetRow) -> str:
    if row.known:
        return _opt(row.lag)
    return '<span class="bad" title="an offset is unknown">-</span>'


def _time(ms: int) -> str:
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def journal(rows: Sequence[JournalRow], start_offset: int, next_offset: int, no_ops: bool) -> str:
    table = _table(
        ("Offset", "Epoch", "Appended (UTC)", "Record", "Fields"),
        (
            f"<tr><td class=n>{r.offset}</td><td class=n>{r.epoch}</td>"
            f"<td>{_e(_time(r.append_time_ms))}</td><td>{_e(r.record_type)}</td>"
            f'<td class="j">{_e(r.fields)}</td></tr>'
            for r in rows
        ),
        "The retained window holds no record.",
    )
    toggle = (
        f'<a href="{PREFIX}/journal">hide NoOpRecords</a>'
        if no_ops
        else f'<a href="{PREFIX}/journal?noop=1">show NoOpRecords</a>'
    )
    return (
        f'<p class="muted">The newest {len(rows)} records of the retained window '
        f"(offsets {start_offset:,} to {max(start_offset, next_offset - 1):,}), newest first"
        f" · {toggle}</p>{table}"
    )
