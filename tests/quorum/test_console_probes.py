"""The console's broker probes (``quorum/console_kafka.py`` ``Probes``) against a broker that
never answers: a listening socket that accepts connections (the kernel's backlog) and says
nothing, as a SIGSTOPped broker does. Real AdminClients, no cluster: each test costs about one
short page deadline."""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest
from immutables import Map

from pykraft.metadata.image import BrokerRegistration, ClusterImage, MetadataImage
from pykraft.metadata.records import BrokerEndpoint
from pykraft.quorum.console_kafka import Budget, Probe, ProbeError, Probes
from pykraft.storage.system_clock import SystemClock

CLOCK = SystemClock()
DEADLINE_S = 0.5


@pytest.fixture(scope="module")
def silent_broker() -> Iterator[MetadataImage]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    port = server.getsockname()[1]
    endpoint = BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port)
    registration = BrokerRegistration(
        id=1, epoch=1, incarnation_id="i", endpoints=(endpoint,), fenced=False
    )
    try:
        yield MetadataImage(cluster=ClusterImage(brokers=Map({1: registration})))
    finally:
        server.close()


def list_groups(probe: Probe, budget: Budget) -> list[tuple[str, str]]:
    return probe.list_groups(budget)


def test_a_page_load_ends_by_its_deadline_and_many_loads_leave_asyncios_pool_free(
    silent_broker: MetadataImage,
) -> None:
    probes = Probes(CLOCK.monotonic_ms, threads=2, max_in_flight=4, deadline_s=DEADLINE_S)

    async def loads() -> tuple[list[Any], float, float]:
        began = time.monotonic()
        pages = [probes.ask(("page", n), silent_broker, list_groups) for n in range(12)]
        tasks = [asyncio.ensure_future(page) for page in pages]
        await asyncio.sleep(0)
        # HTTP Basic password checks run on asyncio's default executor: still free.
        noop_began = time.monotonic()
        await asyncio.to_thread(lambda: None)
        noop_s = time.monotonic() - noop_began
        answers = await asyncio.gather(*tasks, return_exceptions=True)
        return answers, noop_s, time.monotonic() - began

    try:
        answers, noop_s, total_s = asyncio.run(loads())
    finally:
        probes.close()
    assert noop_s < 0.2
    messages = [str(a) for a in answers]
    assert all(isinstance(a, ProbeError) for a in answers), messages
    busy = [m for m in messages if "console is busy" in m]
    assert len(busy) == 8 and probes.started == 4  # the cap, named in the answer
    assert "MAX_PROBES_IN_FLIGHT" in busy[0]
    # Four loads on two threads, each bounded by the deadline (plus librdkafka's slack).
    assert total_s < 2 * DEADLINE_S + 2.5


def test_loads_of_one_page_share_one_probe_and_its_answer_for_a_second(
    silent_broker: MetadataImage,
) -> None:
    probes = Probes(
        CLOCK.monotonic_ms, threads=1, max_in_flight=1, deadline_s=DEADLINE_S, cache_s=30
    )

    async def loads() -> list[object]:
        same = [probes.ask(("groups", 1), silent_broker, list_groups) for _ in range(5)]
        answers = await asyncio.gather(*same, return_exceptions=True)
        again = await asyncio.gather(
            probes.ask(("groups", 1), silent_broker, list_groups), return_exceptions=True
        )
        return [*answers, *again]

    try:
        answers = asyncio.run(loads())
    finally:
        probes.close()
    assert probes.started == 1  # five concurrent loads and one within cache_s: one probe
    assert len({str(a) for a in answers}) == 1 and isinstance(answers[0], ProbeError)


def test_a_groups_page_asks_every_group_at_once_under_one_budget(
    silent_broker: MetadataImage,
) -> None:
    probe = Probe(f"127.0.0.1:{silent_broker.cluster.brokers[1].endpoints[0].port}")
    groups = [f"grp-{n:03}" for n in range(100)]
    budget = Budget(CLOCK.monotonic_ms() + round(DEADLINE_S * 1000), CLOCK.monotonic_ms)
    began = time.monotonic()
    try:
        described = probe.describe_groups(groups, budget)
        committed = probe.committed(groups, budget)
        ends = probe.log_end_offsets([("t", n) for n in range(50)], budget)
    finally:
        probe.close()
    elapsed = time.monotonic() - began
    # Serially, 201 calls of DEADLINE_S each; together, one budget.
    assert elapsed < DEADLINE_S + 1.0
    assert not described and not committed and not ends
    assert budget.notes[-1].startswith("Log end offsets of 50 of 50 partitions unknown")
    assert any("grp-000" in note for note in budget.notes)


def test_failing_loads_reuse_one_client(silent_broker: MetadataImage) -> None:
    probes = Probes(
        CLOCK.monotonic_ms, threads=2, max_in_flight=4, deadline_s=DEADLINE_S, cache_s=0
    )

    async def wave(n: int) -> None:
        pages = [probes.ask(("w", n, i), silent_broker, list_groups) for i in range(4)]
        await asyncio.gather(*pages, return_exceptions=True)

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    try:
        asyncio.run(wave(0))
        after_one = threads()
        for n in range(1, 3):
            asyncio.run(wave(n))
        assert threads() <= after_one  # one AdminClient's threads, not one per load
    finally:
        probes.close()


def _librdkafka_threads() -> set[str]:
    """The task ids of this process's librdkafka threads (named ``rdk:...``)."""
    found = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("rdk:"):
                    found.add(task)
        except OSError:  # the thread ended since the listing
            continue
    return found


def test_closing_destroys_the_client_without_the_garbage_collector(
    silent_broker: MetadataImage,
) -> None:
    """A failed load's traceback keeps its Probe in a reference cycle, which the collector may
    free on one of librdkafka's own threads: librdkafka then aborts the process. ``close``
    destroys the client on the pool's thread, so none of its threads outlive it."""
    earlier = _librdkafka_threads()  # the clients of earlier tests, perhaps still closing
    gc.disable()  # what a collection would free must not count
    try:
        probes = Probes(
            CLOCK.monotonic_ms, threads=2, max_in_flight=4, deadline_s=DEADLINE_S, cache_s=0
        )

        async def wave() -> list[object]:
            pages = [probes.ask(("w", i), silent_broker, list_groups) for i in range(4)]
            return await asyncio.gather(*pages, return_exceptions=True)

        answers = asyncio.run(wave())
        assert all(isinstance(a, ProbeError) for a in answers)
        assert _librdkafka_threads() - earlier  # this test's client
        probes.close()
        deadline = time.monotonic() + 10
        while _librdkafka_threads() - earlier and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _librdkafka_threads() - earlier == set()
    finally:
        gc.enable()
