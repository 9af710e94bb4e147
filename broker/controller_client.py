"""The broker's (and the admin tools') client of the controller quorum's HTTP API.

Theory of operation
-------------------
Every call goes through ``ControllerClient._call``, which picks a controller, sends one JSON
request with aiohttp and classifies the answer (quorum/service.py documents the error shapes):

* ``421 NOT_CONTROLLER`` with ``leader``: the write reached a follower. The leader's URL is
  remembered and the request is sent there at once (Kafka's clients likewise retry at the
  controller a NOT_CONTROLLER names).
* ``503 NOT_CONTROLLER`` (no leader during an election), a connection failure, or — for
  idempotent requests only — ``503 REQUEST_TIMED_OUT``: the next controller of the bootstrap
  list is tried after an exponential back-off with jitter (tenacity), until the call's deadline.
  A non-idempotent write whose outcome is unknown (timed out) is not resent: creating a topic
  twice would answer TOPIC_ALREADY_EXISTS for a topic this very call created.
* any other error: raised at once as ``ControllerRequestError`` (a ``ControllerError`` whose
  ``error`` is the controller's Kafka error name, e.g. TOPIC_ALREADY_EXISTS).

Every failure surfaces as ``broker.controller_api.ControllerError``, so this class
satisfies the admin handlers' ``ControllerClient`` protocol. The loop is bounded by the call's
deadline and ``MAX_ATTEMPTS`` (STYLE.md §7).

Reads (GET) are answered by any controller from its committed image; the client still prefers
the last known leader, whose image is the freshest.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import aiohttp
import attrs
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt
from tenacity import stop_after_delay as tenacity_stop_after_delay

from broker.controller_api import (
    ControllerError,
    CreatedTopic,
    DeletedTopic,
    NewTopic,
)
from broker.offline_log_dirs import NO_OFFLINE_LOG_DIRS, OfflineLogDirs
from metadata.codec import MetadataCodecError, record_from_json
from metadata.records import BrokerEndpoint, BrokerFeature, MetadataRecord

logger = logging.getLogger(__name__)

# Bounds (STYLE.md §7).
MAX_ATTEMPTS = 50
DEFAULT_DEADLINE_S = 30.0
REQUEST_TIMEOUT_S = 15.0
BACKOFF_INITIAL_S = 0.05
BACKOFF_MAX_S = 1.0
# The JSON body of one answer; a records page of 100,000 records stays well below.
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


# ---------------------------------------------------------------------------- answers


@attrs.frozen(kw_only=True)
class BrokerRegistrationReply:
    broker_epoch: int
    heartbeat_interval_ms: int
    session_timeout_ms: int


@attrs.frozen(kw_only=True)
class HeartbeatReply:
    """Kafka's BrokerHeartbeatResponse fields."""

    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shut_down: bool


@attrs.frozen(kw_only=True)
class MetadataBatch:
    """One committed atomic batch; record ``i`` has offset ``base_offset + i``."""

    base_offset: int
    last_offset: int
    epoch: int
    append_time_ms: int
    records: tuple[MetadataRecord, ...]


@attrs.frozen(kw_only=True)
class RecordsPage:
    from_offset: int
    # The offset to ask for next (one past the last record of ``batches``).
    next_offset: int
    # One past the controller's last committed offset when it answered.
    log_end_offset: int
    batches: tuple[MetadataBatch, ...]


@attrs.frozen(kw_only=True)
class SnapshotRef:
    snapshot_id: str
    # Exclusive: the first offset after the snapshot (Kafka's snapshot id end offset).
    end_offset: int
    epoch: int


@attrs.frozen(kw_only=True)
class TopicListing:
    name: str
    topic_id: str
    partitions: int


@attrs.frozen(kw_only=True)
class PartitionDescription:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@attrs.frozen(kw_only=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]
    # Every topic config with its effective value.
    configs: Mapping[str, str]


def parse_partition(raw: Mapping[str, Any]) -> PartitionDescription:
    return PartitionDescription(
        partition=int(raw["partition"]), leader=int(raw["leader"]),
        leader_epoch=int(raw["leader_epoch"]), replicas=tuple(raw["replicas"]),
        isr=tuple(raw["isr"]), adding_replicas=tuple(raw.get("adding_replicas", ())),
        removing_replicas=tuple(raw.get("removing_replicas", ())))


class ControllerRequestError(ControllerError):
    """The controller answered with an error; ``status`` is the HTTP status."""

    def __init__(self, status: int, error: str, message: str, body: Mapping[str, Any]) -> None:
        super().__init__(error, message)
        self.status = status
        self.body = dict(body)


class SnapshotRequiredError(ControllerRequestError):
    """The offset asked for is below the controller's retained window (409 SNAPSHOT_REQUIRED)."""

    @property
    def snapshot(self) -> SnapshotRef | None:
        raw = self.body.get("snapshot")
        if not isinstance(raw, dict):
            return None
        return SnapshotRef(snapshot_id=str(raw["id"]), end_offset=int(raw["end_offset"]),
                           epoch=int(raw["epoch"]))


class _Retry(Exception):
    """An answer that another attempt may fix; ``immediately`` for a leader redirect."""

    def __init__(self, error: ControllerError, *, immediately: bool = False) -> None:
        super().__init__(str(error))
        self.error = error
        self.immediately = immediately


def normalize_url(address: str) -> str:
    """``host:port`` or ``http://host:port`` (any trailing slash dropped) as a base URL."""
    address = address.strip().rstrip("/")
    return address if "://" in address else f"http://{address}"


def _backoff(state: RetryCallState) -> float:
    outcome = state.outcome
    error = outcome.exception() if outcome is not None else None
    if isinstance(error, _Retry) and error.immediately:
        return 0.0
    return float(min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * 2 ** (state.attempt_number - 1)))


class ControllerClient:
    """aiohttp client of the controllers' ``/v1`` API; one per process, closed with ``close``."""

    def __init__(self, bootstrap: Sequence[str], *, deadline_s: float = DEFAULT_DEADLINE_S,
                 bearer_token: str | None = None) -> None:
        if not bootstrap:
            raise ValueError("at least one controller address is needed")
        self.urls = [normalize_url(address) for address in bootstrap]
        self.deadline_s = deadline_s
        self._headers = {"Authorization": f"Bearer {bearer_token}"} if bearer_token else {}
        self._leader_url: str | None = None
        self._next_index = 0
        self._session: aiohttp.ClientSession | None = None

    @property
    def leader_url(self) -> str | None:
        """The active controller's URL as last learned (a redirect or a successful write)."""
        return self._leader_url

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> ControllerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ transport

    def _target(self) -> str:
        if self._leader_url is not None:
            return self._leader_url
        return self.urls[self._next_index % len(self.urls)]

    def _forget(self, url: str) -> None:
        """``url`` failed: try the next bootstrap controller next time."""
        if self._leader_url == url:
            self._leader_url = None
        if url in self.urls:
            self._next_index = self.urls.index(url) + 1
        else:
            self._next_index += 1

    async def _call(self, method: str, path: str, *, body: Any = None,
                    params: Mapping[str, str] | None = None, idempotent: bool = True,
                    timeout_s: float = REQUEST_TIMEOUT_S,
                    deadline_s: float | None = None) -> Any:
        retrying = AsyncRetrying(
            stop=(tenacity_stop_after_delay(deadline_s or self.deadline_s)
                  | stop_after_attempt(MAX_ATTEMPTS)),
            wait=_backoff, retry=retry_if_exception_type(_Retry), reraise=True)
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._attempt(method, path, body, params, idempotent,
                                               timeout_s)
        except _Retry as last:
            raise last.error from None
        raise AssertionError("tenacity returns or raises")

    async def _attempt(self, method: str, path: str, body: Any,
                       params: Mapping[str, str] | None, idempotent: bool,
                       timeout_s: float) -> Any:
        url = self._target()
        if self._session is None:
            self._session = aiohttp.ClientSession(headers=self._headers)
        try:
            async with self._session.request(
                    method, url + path, json=body, params=params,
                    timeout=aiohttp.ClientTimeout(total=timeout_s)) as response:
                if (response.content_length or 0) > MAX_RESPONSE_BYTES:
                    raise ControllerError("UNKNOWN_SERVER_ERROR",
                                          f"{url} answered {response.content_length} bytes, "
                                          "over the limit")
                payload = await response.read()
                status = response.status
                is_json = response.content_type == "application/json"
        except (aiohttp.ClientConnectorError, aiohttp.ServerDisconnectedError,
                aiohttp.ClientOSError, TimeoutError) as error:
            self._forget(url)
            failure = ControllerError("REQUEST_TIMED_OUT",
                                      f"controller {url} is unreachable: {error or 'timed out'}")
            # Not connected at all: nothing was sent, so even a write may be resent.
            sent = not isinstance(error, aiohttp.ClientConnectorError)
            if sent and not idempotent:
                raise failure from None
            raise _Retry(failure) from None
        if status < 400 and not is_json:
            return payload  # a snapshot download (NDJSON), not a JSON document
        return self._classify(url, status, payload, idempotent)

    def _classify(self, url: str, status: int, payload: bytes, idempotent: bool) -> Any:
        try:
            answer = json.loads(payload) if payload else {}
        except ValueError:
            raise ControllerError("UNKNOWN_SERVER_ERROR",
                                  f"{url} answered HTTP {status} without a JSON body") from None
        if status < 400:
            return answer
        body = answer if isinstance(answer, dict) else {}
        error = str(body.get("error", "UNKNOWN_SERVER_ERROR"))
        message = str(body.get("message", f"HTTP {status}"))
        return self._raise_error(url, status, error, message, body, idempotent)

    def _raise_error(self, url: str, status: int, error: str, message: str,
                     body: dict[str, Any], idempotent: bool) -> Any:
        failure_class = SnapshotRequiredError if error == "SNAPSHOT_REQUIRED" else \
            ControllerRequestError
        failure = failure_class(status, error, message, body)
        if error == "NOT_CONTROLLER":
            leader = body.get("leader")
            if isinstance(leader, str) and leader and normalize_url(leader) != url:
                self._leader_url = normalize_url(leader)
                raise _Retry(failure, immediately=True)
            self._forget(url)
            raise _Retry(failure)
        if error == "REQUEST_TIMED_OUT" and idempotent:
            raise _Retry(failure)
        raise failure

    def _remember_leader(self) -> None:
        """A write succeeded: the controller that took it is the leader."""
        self._leader_url = self._target()

    async def _write(self, method: str, path: str, body: Any = None, *,
                     idempotent: bool, deadline_s: float | None = None) -> Any:
        answer = await self._call(method, path, body=body, idempotent=idempotent,
                                  deadline_s=deadline_s)
        self._remember_leader()
        return answer

    # ------------------------------------------------------------------ broker RPCs

    async def register_broker(self, *, broker_id: int, incarnation_id: str,
                              endpoints: Sequence[BrokerEndpoint], rack: str | None,
                              features: Sequence[BrokerFeature] = (),
                              deadline_s: float | None = None) -> BrokerRegistrationReply:
        """POST /v1/brokers/register (KIP-631); idempotent for one incarnation id."""
        answer = await self._write("POST", "/v1/brokers/register", {
            "broker_id": broker_id, "incarnation_id": incarnation_id, "rack": rack,
            "endpoints": [{"name": e.name, "host": e.host, "port": e.port,
                           "security_protocol": e.security_protocol} for e in endpoints],
            "features": [{"name": f.name, "min_supported_version": f.min_supported_version,
                          "max_supported_version": f.max_supported_version} for f in features],
        }, idempotent=True, deadline_s=deadline_s)
        return BrokerRegistrationReply(
            broker_epoch=int(answer["broker_epoch"]),
            heartbeat_interval_ms=int(answer["heartbeat_interval_ms"]),
            session_timeout_ms=int(answer["session_timeout_ms"]))

    async def heartbeat(self, *, broker_id: int, broker_epoch: int, current_metadata_offset: int,
                        want_fence: bool, want_shut_down: bool,
                        offline_log_dirs: OfflineLogDirs = NO_OFFLINE_LOG_DIRS,
                        deadline_s: float | None = None) -> HeartbeatReply:
        body: dict[str, Any] = {
            "broker_id": broker_id, "broker_epoch": broker_epoch,
            "current_metadata_offset": current_metadata_offset,
            "want_fence": want_fence, "want_shut_down": want_shut_down,
        }
        if offline_log_dirs.directory_ids:
            body["offline_log_dirs"] = list(offline_log_dirs.directory_ids)
            body["offline_replicas"] = [{"topic_id": topic_id, "partition": partition}
                                        for topic_id, partition in offline_log_dirs.replicas]
        answer = await self._write("POST", "/v1/brokers/heartbeat", body, idempotent=True,
                                   deadline_s=deadline_s)
        return HeartbeatReply(
            is_caught_up=bool(answer["is_caught_up"]), is_fenced=bool(answer["is_fenced"]),
            in_controlled_shutdown=bool(answer["in_controlled_shutdown"]),
            should_shut_down=bool(answer["should_shut_down"]))

    async def fetch_records(self, from_offset: int, *, max_wait_ms: int,
                            max_records: int) -> RecordsPage:
        """GET /v1/metadata/records (long poll); raises ``SnapshotRequiredError`` below the
        controller's window and ``ControllerError`` for an undecodable record."""
        answer = await self._call("GET", "/v1/metadata/records", params={
            "from": str(from_offset), "max_wait_ms": str(max_wait_ms),
            "max_records": str(max_records)}, timeout_s=REQUEST_TIMEOUT_S + max_wait_ms / 1000)
        try:
            batches = tuple(MetadataBatch(
                base_offset=int(batch["base_offset"]), last_offset=int(batch["last_offset"]),
                epoch=int(batch["epoch"]), append_time_ms=int(batch["append_time_ms"]),
                records=tuple(record_from_json(record) for record in batch["records"]),
            ) for batch in answer["batches"])
        except (MetadataCodecError, KeyError, TypeError, ValueError) as error:
            raise ControllerError("CORRUPT_MESSAGE",
                                  f"undecodable metadata from offset {from_offset}: {error}") \
                from None
        return RecordsPage(from_offset=int(answer["from_offset"]),
                           next_offset=int(answer["next_offset"]),
                           log_end_offset=int(answer["log_end_offset"]), batches=batches)

    async def download_snapshot(self, snapshot_id: str) -> bytes:
        """GET /v1/metadata/snapshots/{id}: the snapshot file's bytes."""
        data = await self._call("GET", f"/v1/metadata/snapshots/{snapshot_id}",
                                timeout_s=REQUEST_TIMEOUT_S * 4)
        if not isinstance(data, bytes):
            raise ControllerError("UNKNOWN_SERVER_ERROR",
                                  f"snapshot {snapshot_id} came back as JSON, not a file")
        return data

    async def alter_partition(self, *, broker_id: int, broker_epoch: int,
                              partitions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """POST /v1/alter-partition; one result per partition (its ``error`` may be set)."""
        answer = await self._write("POST", "/v1/alter-partition", {
            "broker_id": broker_id, "broker_epoch": broker_epoch,
            "partitions": [dict(p) for p in partitions]}, idempotent=True)
        return list(answer["partitions"])

    async def allocate_producer_ids(self, *, broker_id: int,
                                    broker_epoch: int) -> tuple[int, int]:
        """POST /v1/producer-ids (KIP-730): (first producer id, block length)."""
        answer = await self._write("POST", "/v1/producer-ids", {
            "broker_id": broker_id, "broker_epoch": broker_epoch}, idempotent=False)
        return int(answer["producer_id_start"]), int(answer["producer_id_len"])

    async def unregister_broker(self, broker_id: int) -> None:
        await self._write("DELETE", f"/v1/brokers/{broker_id}", idempotent=True)

    # ------------------------------------------------------------------ admin

    async def create_topic(self, topic: NewTopic, *, validate_only: bool) -> CreatedTopic:
        answer = await self._write("POST", "/v1/topics", {
            "name": topic.name, "partitions": topic.num_partitions,
            "replication_factor": topic.replication_factor,
            "assignments": {str(p): list(r) for p, r in topic.assignments.items()},
            "configs": dict(topic.configs), "validate_only": validate_only,
        }, idempotent=validate_only)
        return CreatedTopic(name=answer["name"], topic_id=answer["topic_id"],
                            num_partitions=int(answer["partitions"]),
                            replication_factor=int(answer["replication_factor"]))

    async def delete_topic(self, name: str) -> DeletedTopic:
        answer = await self._write("DELETE", f"/v1/topics/{_quote(name)}", idempotent=False)
        return DeletedTopic(name=answer["name"], topic_id=answer["topic_id"])

    async def create_partitions(self, name: str, count: int,
                                assignments: Sequence[Sequence[int]] | None, *,
                                validate_only: bool) -> None:
        await self._write("POST", f"/v1/topics/{_quote(name)}/partitions", {
            "count": count, "validate_only": validate_only,
            "assignments": None if assignments is None else [list(a) for a in assignments],
        }, idempotent=validate_only)

    async def describe_configs(self, resource_type: str, resource_name: str) -> Mapping[str, str]:
        answer = await self._call(
            "GET", f"/v1/configs/{_quote(resource_type)}/{_quote(resource_name)}")
        return {str(k): str(v) for k, v in answer["configs"].items()}

    async def alter_configs(self, resource_type: str, resource_name: str, *,
                            set_configs: Mapping[str, str], delete: Sequence[str] = (),
                            validate_only: bool = False) -> Mapping[str, str]:
        answer = await self._write(
            "PUT", f"/v1/configs/{_quote(resource_type)}/{_quote(resource_name)}",
            {"set": dict(set_configs), "delete": list(delete), "validate_only": validate_only},
            idempotent=True)
        return {str(k): str(v) for k, v in answer["configs"].items()}

    async def list_topics(self) -> list[TopicListing]:
        answer = await self._call("GET", "/v1/topics")
        return [TopicListing(name=t["name"], topic_id=t["topic_id"],
                             partitions=int(t["partitions"])) for t in answer["topics"]]

    async def describe_topic(self, name: str) -> TopicDescription:
        answer = await self._call("GET", f"/v1/topics/{_quote(name)}")
        return TopicDescription(
            name=answer["name"], topic_id=answer["topic_id"],
            partitions=tuple(parse_partition(p) for p in answer["partitions"]),
            configs={str(k): str(v) for k, v in answer.get("configs", {}).items()})

    async def cluster(self) -> dict[str, Any]:
        """GET /v1/cluster: controller id, controllers, metadata offset, counts."""
        answer: dict[str, Any] = await self._call("GET", "/v1/cluster")
        return answer

    async def list_brokers(self) -> list[dict[str, Any]]:
        answer = await self._call("GET", "/v1/brokers")
        return list(answer["brokers"])


def _quote(segment: str) -> str:
    """A path segment with '/' and other reserved characters escaped."""
    return quote(segment, safe="")
