"""What the web console asks the brokers, over the Kafka protocol (confluent-kafka's AdminClient).

Why the Kafka protocol and not the brokers' ``/metrics``: consumer groups live on the brokers'
group coordinators, and Kafka's own tools read them with ListGroups, DescribeGroups, OffsetFetch
and ListOffsets; the controller knows every broker's Kafka listeners from its metadata image
(``RegisterBrokerRecord.EndPoints``) but not their HTTP ports. The brokers' live rates do not
come from here: they ride on the brokers' heartbeats (``quorum/broker_rates.py``).

The controller connects to a PLAINTEXT listener of the brokers (security protocol 0); a cluster
whose brokers have none shows the groups and rates as unavailable, with the reason, rather than
hold client credentials on the controllers.

librdkafka blocks, so ``Probes`` runs the work of a page in its own small thread pool
(``PROBE_THREADS``), never asyncio's default executor (HTTP Basic password checks use that one),
through ONE long-lived AdminClient per set of brokers, created, replaced and dropped in that
pool's thread. Each page's work gets one ``Budget`` (``PAGE_DEADLINE_S``): every call is issued
at once and awaited against what is left of it, and what did not arrive by then is a note. At
most ``MAX_PROBES_IN_FLIGHT`` loads run or wait; past that a page says the console is busy.
Concurrent loads of the same page share one probe, and its answer serves ``CACHE_S`` more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import attrs
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin import OffsetSpec as _OffsetSpec  # type: ignore[attr-defined]

from pykraft.metadata.image import MetadataImage
from pykraft.quorum.console_views import Member

T = TypeVar("T")
# The documented confluent_kafka.admin.OffsetSpec (its module imports it without ``as``, so
# mypy calls it private; untyped, hence Any).
OffsetSpec: Any = _OffsetSpec
PLAINTEXT = 0  # Kafka's SecurityProtocol id
PROBE_THREADS = 2
MAX_PROBES_IN_FLIGHT = 4
PAGE_DEADLINE_S = 4.0
CACHE_S = 1.0
LOG_WARNING = 4
_STATE_NAMES = {
    "STABLE": "Stable",
    "EMPTY": "Empty",
    "DEAD": "Dead",
    "PREPARING_REBALANCING": "PreparingRebalance",
    "COMPLETING_REBALANCING": "CompletingRebalance",
}


class ProbeError(Exception):
    """The brokers could not be asked; the message says why, for the page."""


def bootstrap_servers(image: MetadataImage) -> str:
    """The PLAINTEXT listeners of the unfenced brokers; ProbeError when there is none."""
    servers = [
        f"{endpoint.host}:{endpoint.port}"
        for _, broker in sorted(image.cluster.brokers.items())
        if not broker.fenced
        for endpoint in broker.endpoints
        if endpoint.security_protocol == PLAINTEXT
    ]
    if not servers:
        raise ProbeError("No running broker has a PLAINTEXT listener the controller can read.")
    return ",".join(servers)


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return _STATE_NAMES.get(name, name.title())


def _reason(error: BaseException) -> str:
    if isinstance(error, KafkaException):
        return str(error.args[0] if error.args else error)
    if isinstance(error, TimeoutError):
        return "The brokers did not answer in time."
    return str(error) or type(error).__name__


@attrs.define
class Budget:
    """One page's deadline (milliseconds on ``monotonic_ms``, the controller's clock) and the
    notes of what fell short."""

    until_ms: int
    monotonic_ms: Callable[[], int]
    notes: list[str] = attrs.field(factory=list)

    def left(self) -> float:
        """Seconds left (what ``Future.result`` takes)."""
        return max(0, self.until_ms - self.monotonic_ms()) / 1000

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _wait(future: Future[T], budget: Budget) -> T:
    """The future's answer within what is left of ``budget``; ProbeError says why not."""
    try:
        return future.result(timeout=budget.left())
    except (KafkaException, TimeoutError) as error:
        raise ProbeError(_reason(error)) from None


class Probe:
    """One AdminClient; every method returns by ``budget``'s deadline."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self._client: AdminClient | None = AdminClient(
            {"bootstrap.servers": bootstrap, "log_level": LOG_WARNING, "client.id": "console"}
        )

    @property
    def _admin(self) -> AdminClient:
        if self._client is None:
            raise ProbeError("The console's broker client was closed.")
        return self._client

    def close(self) -> None:
        """Destroy the client now, on this thread. librdkafka aborts the process when a client
        is destroyed on one of its own threads, and the garbage collector may run on those (they
        call into Python to complete the admin futures): a worker of the test suite died so,
        collecting a Probe that a failed load's traceback kept in a reference cycle. Closed, a
        Probe holds nothing of librdkafka's, wherever it is collected."""
        self._client = None

    def _request_timeout(self, budget: Budget) -> float:
        return max(0.1, budget.left())

    def list_groups(self, budget: Budget) -> list[tuple[str, str]]:
        answer = _wait(
            self._admin.list_consumer_groups(request_timeout=self._request_timeout(budget)), budget
        )
        if answer.errors:
            budget.note(
                f"{len(answer.errors)} broker(s) did not list their groups: "
                f"{_reason(answer.errors[0])}"
            )
            if not answer.valid:
                raise ProbeError(_reason(answer.errors[0]))
        return sorted((g.group_id, _state_name(g.state)) for g in answer.valid)

    def describe_groups(
        self, groups: Sequence[str], budget: Budget
    ) -> dict[str, tuple[str, tuple[Member, ...]]]:
        """One DescribeGroups for all ``groups``; a group that did not answer is absent."""
        if not groups:
            return {}
        futures = self._admin.describe_consumer_groups(
            list(groups), request_timeout=self._request_timeout(budget)
        )
        found = {}
        for group, future in futures.items():
            try:
                answer = _wait(future, budget)
            except ProbeError as error:
                budget.note(f"Group {group!r} was not described: {error}")
                continue
            members = tuple(
                Member(
                    m.member_id,
                    m.host,
                    m.client_id,
                    tuple((p.topic, p.partition) for p in m.assignment.topic_partitions),
                )
                for m in answer.members
            )
            found[group] = (_state_name(answer.state), members)
        return found

    def committed(
        self, groups: Sequence[str], budget: Budget
    ) -> dict[str, dict[tuple[str, int], int]]:
        """Each group's committed offsets (OffsetFetch), all asked before any is awaited
        (librdkafka takes one group per request); negative offsets (none committed) absent."""
        futures = {
            group: self._admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)], request_timeout=self._request_timeout(budget)
            )[group]
            for group in groups
        }
        found: dict[str, dict[tuple[str, int], int]] = {}
        for group, future in futures.items():
            try:
                answer = _wait(future, budget)
            except ProbeError as error:
                budget.note(f"Committed offsets of group {group!r} unavailable: {error}")
                continue
            found[group] = {
                (p.topic, p.partition): p.offset
                for p in answer.topic_partitions or []
                if p.offset >= 0 and p.error is None
            }
        return found

    def log_end_offsets(
        self, partitions: Collection[tuple[str, int]], budget: Budget
    ) -> dict[tuple[str, int], int]:
        """One ListOffsets(latest) for all ``partitions``; a partition whose leader did not
        answer, or answered a negative offset (unknown), is absent and counted in a note."""
        if not partitions:
            return {}
        request = {ConfluentPartition(t, p): OffsetSpec.latest() for t, p in partitions}
        futures = self._admin.list_offsets(request, request_timeout=self._request_timeout(budget))
        found = {}
        failures: list[str] = []
        for partition, future in futures.items():
            try:
                offset = int(_wait(future, budget).offset)
            except ProbeError as error:
                failures.append(str(error))
                continue
            if offset < 0:
                failures.append(f"{partition.topic}-{partition.partition} answered {offset}")
                continue
            found[(partition.topic, partition.partition)] = offset
        if failures:
            budget.note(
                f"Log end offsets of {len(failures)} of {len(futures)} partitions unknown: "
                f"{failures[0]}"
            )
        return found


def group_partitions(
    members: Sequence[Member], committed: Mapping[tuple[str, int], int]
) -> set[tuple[str, int]]:
    return {key for m in members for key in m.assignment} | set(committed)


@attrs.define
class _Load:
    future: asyncio.Future[Any]
    done_at: float | None = None


class Probes:
    """The console's broker probes: a pool of ``threads`` threads owning one ``Probe``, at most
    ``max_in_flight`` loads, each bounded by ``deadline_s``; loads of the same key merged and
    their answer kept ``cache_s``."""

    def __init__(
        self,
        monotonic_ms: Callable[[], int],
        threads: int = PROBE_THREADS,
        max_in_flight: int = MAX_PROBES_IN_FLIGHT,
        deadline_s: float = PAGE_DEADLINE_S,
        cache_s: float = CACHE_S,
    ) -> None:
        self.monotonic_ms = monotonic_ms
        self.max_in_flight = max_in_flight
        self.deadline_s = deadline_s
        self.cache_s = cache_s
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="console-probe")
        self._probe: Probe | None = None
        self._loads: dict[Any, _Load] = {}
        self.started = 0  # loads that reached the pool (tests count merges with it)

    def _in_flight(self) -> int:
        return sum(1 for load in self._loads.values() if not load.future.done())

    def _probe_for(self, bootstrap: str) -> Probe:
        """Runs in the pool: the AdminClient is made and dropped on its threads only."""
        if self._probe is None or self._probe.bootstrap != bootstrap:
            self._drop_probe()
            self._probe = Probe(bootstrap)
        return self._probe

    async def ask(
        self, key: Any, image: MetadataImage, work: Callable[[Probe, Budget], T]
    ) -> tuple[T, list[str]]:
        """``work``'s answer and the notes of what fell short; ProbeError when the brokers
        cannot be asked, the console is busy or nothing arrived before the deadline."""
        now = self.monotonic_ms() / 1000
        for old in [k for k, load in self._loads.items() if _expired(load, now, self.cache_s)]:
            del self._loads[old]
        load = self._loads.get(key)
        if load is None:
            if self._in_flight() >= self.max_in_flight:
                raise ProbeError(
                    f"The console is busy: {self.max_in_flight} broker probes are in flight "
                    "(console MAX_PROBES_IN_FLIGHT); try again shortly."
                )
            bootstrap = bootstrap_servers(image)
            budget = Budget(round((now + self.deadline_s) * 1000), self.monotonic_ms)

            def run() -> tuple[T, list[str]]:
                return work(self._probe_for(bootstrap), budget), budget.notes

            self.started += 1
            load = _Load(asyncio.wrap_future(self._pool.submit(run)))
            load.future.add_done_callback(lambda _: _finished(load, self.monotonic_ms))
            self._loads[key] = load
        try:
            answer: tuple[T, list[str]] = await asyncio.wait_for(
                asyncio.shield(load.future), self.deadline_s + 1
            )
        except TimeoutError:
            raise ProbeError("The brokers did not answer in time.") from None
        return answer

    def close(self) -> None:
        """Stop taking work: queued loads cancelled, the client dropped on the pool's thread
        after the running ones, which return by their deadline."""
        for load in self._loads.values():
            load.future.cancel()  # a queued load's pool future with it (asyncio.wrap_future)
        self._pool.submit(self._drop_probe)
        self._pool.shutdown(wait=False)

    def _drop_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.close()


def _finished(load: _Load, monotonic_ms: Callable[[], int]) -> None:
    load.done_at = monotonic_ms() / 1000
    if not load.future.cancelled():
        load.future.exception()  # retrieved: a failed load is not "never retrieved"


def _expired(load: _Load, now: float, cache_s: float) -> bool:
    return load.done_at is not None and now - load.done_at >= cache_s
