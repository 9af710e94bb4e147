"""A metadata commit's timeline from ``quorum/commit_trace.py``'s files (pure).

Each controller's ``trace-<node.id>.tsv`` holds ``event, raft index, ns``; the client adds its own
``request`` / ``response`` times. A commit is the Raft index the leader applied for one client
request (its ``propose`` falls inside the request); for it the hops below are differences of
two timestamps, the follower's from the follower that answered first. ``timeline`` gives each
hop's median in microseconds over every complete commit.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

# Process-local timestamps of one Raft index: event -> ns.
Events = dict[str, int]

# (hop name, from, to): "F." names an event of the follower that answered first.
HOPS = (
    ("http request -> propose", "request", "propose"),
    ("propose -> Raft thread appended", "propose", "appended"),
    ("appended -> AppendEntries send starts", "appended", "ae_start"),
    ("AppendEntries encode + send (both followers)", "ae_start", "ae_sent"),
    ("sent -> follower decoded it", "ae_sent", "F.ae_received"),
    ("follower append (+ sync) -> answer sent", "F.ae_received", "F.answer_sent"),
    ("answer sent -> leader decoded it", "F.answer_sent", "answer_received"),
    ("answer -> committed + applied + callback", "answer_received", "applied"),
    ("callback -> event loop resumed the write", "applied", "resumed"),
    ("resumed -> http response read by the client", "resumed", "response"),
    ("leader: AppendEntries sent -> own sync done", "ae_sent", "synced"),
    ("total (client)", "request", "response"),
)


def parse_trace(text: str) -> dict[int, Events]:
    """A trace file's lines by Raft index (an event seen twice keeps its first time)."""
    by_index: dict[int, Events] = defaultdict(dict)
    for line in text.splitlines():
        event, index, ns = line.split("\t")
        by_index[int(index)].setdefault(event, int(ns))
    return dict(by_index)


def commits(
    leader: dict[int, Events],
    followers: list[dict[int, Events]],
    requests: list[tuple[int, int]],
) -> list[Events]:
    """One merged ``Events`` per client request whose commit the leader traced."""
    proposed = sorted(
        (events["propose"], index) for index, events in leader.items() if "propose" in events
    )
    merged = []
    position = 0
    for request_ns, response_ns in requests:
        while position < len(proposed) and proposed[position][0] < request_ns:
            position += 1
        if position == len(proposed) or proposed[position][0] > response_ns:
            continue
        index = proposed[position][1]
        events = dict(leader[index], request=request_ns, response=response_ns)
        answering = [f[index] for f in followers if "answer_sent" in f.get(index, {})]
        if answering:
            first = min(answering, key=lambda follower: follower["answer_sent"])
            events.update({f"F.{name}": ns for name, ns in first.items()})
        merged.append(events)
    return merged


def timeline(merged: list[Events]) -> dict[str, float]:
    """Each hop's median in microseconds (hops some commit lacks use the commits that have
    both ends), and how many commits were merged."""
    figures: dict[str, float] = {"commits": float(len(merged))}
    for name, start, end in HOPS:
        spans = [(e[end] - e[start]) / 1000 for e in merged if start in e and end in e]
        if spans:
            figures[name] = round(statistics.median(spans), 1)
    return figures
