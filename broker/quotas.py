"""Client quota enforcement, the pure core (Kafka's ``ClientQuotaManager``,
``ClientRequestQuotaManager``, ``QuotaUtils``; KIP-13, KIP-55, KIP-124, KIP-219, KIP-546).

Theory of operation. Each quota type — produce bytes (``producer_byte_rate``), fetch bytes
(``consumer_byte_rate``), request handler time (``request_percentage``) — has one
``ClientQuotaManager``. A request's (user principal name, client id) is mapped to the *metric
tags* of the quota that applies (``quota_metric_tags``, Kafka's ``DefaultQuotaCallback``), in
Kafka's precedence order::

    1. /config/users/<user>/clients/<client-id>     5. /config/users/<default>/clients/<default>
    2. /config/users/<user>/clients/<default>       6. /config/users/<default>
    3. /config/users/<user>                         7. /config/clients/<client-id>
    4. /config/users/<default>/clients/<client-id>  8. /config/clients/<default>

The tags name who shares the rate: (user, "") when a user-level quota applies, so all of a
user's clients share it; ("", client id) for client-id quotas; (user, client id) for the
combined ones. ``quota_limit`` reads the bound for those tags back from the image; both are
worked out once per client and image (``_applicable``), and not at all while the image holds no
quota (Kafka's ``quotasEnabled``: then nothing is recorded). Each tag
pair owns a ``Rate`` (``fetcher/sampled_rate.py``, Kafka's ``Rate`` over ``SampledStat``:
``quota.window.num`` samples of ``quota.window.size.seconds`` each, 11 * 1 s by default), kept
under a fixed-size digest of the tags — a client id may be 32 KB — dropped after an hour unused
(Kafka's inactive sensor expiry) or when ``MAX_QUOTA_SENSORS`` are kept. Recording adds the
value, then measures: over the bound, the request is throttled for
``(rate - bound) / bound * window`` milliseconds (``QuotaUtils.throttleTime``) — the time the
client must stay silent for the rate to come back to the bound; request-time throttles are
capped at one window (``QuotaUtils.boundedThrottleTime``). The response carries that
``throttle_time_ms`` and the shell mutes the connection for as long (KIP-219). Nothing here
does I/O or reads a clock: every call takes ``now_ms``.
"""

from __future__ import annotations

import enum
import hashlib
from collections import OrderedDict

import attrs

from pykraft.fetcher.sampled_rate import Rate
from pykraft.metadata.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotasImage,
    quota_entity,
)

# quota.window.num and quota.window.size.seconds (Kafka's QuotaConfig defaults).
DEFAULT_QUOTA_WINDOW_NUM = 11
DEFAULT_QUOTA_WINDOW_SIZE_SECONDS = 1
# Rates kept at most per quota type; the least recently used goes first.
MAX_QUOTA_SENSORS = 100_000
# A rate unused this long is dropped (ClientQuotaManager.InactiveSensorExpirationTimeSeconds).
INACTIVE_SENSOR_EXPIRATION_MS = 3_600 * 1000
# (user, client id) pairs whose quota is kept worked out per image (``_applicable``); past it
# the memo starts over. A pair longer than MAX_RESOLVED_KEY_CHARS (a client id may be 32 KB) is
# worked out each time instead, so the memo holds at most about 1,024 x 2 x 256 characters.
MAX_RESOLVED_QUOTAS = 1_024
MAX_RESOLVED_KEY_CHARS = 256
# ClientRequestQuotaManager: request time is a percentage of one thread over a second.
NANOS_TO_PERCENTAGE_PER_SECOND = 100.0 / 1e9


class QuotaType(enum.Enum):
    """Kafka's ``ClientQuotaType`` with the quota key it reads."""

    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE


@attrs.frozen
class QuotaWindow:
    samples: int = DEFAULT_QUOTA_WINDOW_NUM
    window_ms: int = DEFAULT_QUOTA_WINDOW_SIZE_SECONDS * 1000

    def __attrs_post_init__(self) -> None:
        # Kafka's atLeast(1) for both (broker.config enforces it on the properties).
        assert self.samples >= 1 and self.window_ms >= 1, self


# (sanitized user, client id); "" leaves a part out of the quota (Kafka's DefaultTags).
MetricTags = tuple[str, str]


def _has(quotas: ClientQuotasImage, key: str, *parts: tuple[str, str | None]) -> bool:
    return key in quotas.quotas(quota_entity(parts))


def quota_metric_tags(
    quotas: ClientQuotasImage, quota_type: QuotaType, user: str, client_id: str
) -> MetricTags:
    """Who shares the rate ``(user, client_id)`` is held to (``DefaultQuotaCallback
    .quotaMetricTags``): walk the precedence order down to the first entity with a quota."""
    key = quota_type.value
    checks: tuple[tuple[tuple[tuple[str, str | None], ...], MetricTags], ...] = (
        (((USER, user), (CLIENT_ID, client_id)), (user, client_id)),
        (((USER, user), (CLIENT_ID, None)), (user, client_id)),
        (((USER, user),), (user, "")),
        (((USER, None), (CLIENT_ID, client_id)), (user, client_id)),
        (((USER, None), (CLIENT_ID, None)), (user, client_id)),
        (((USER, None),), (user, "")),
    )
    for parts, tags in checks:
        if _has(quotas, key, *parts):
            return tags
    # 7) /config/clients/<client-id>, 8) /config/clients/<default>.
    return ("", client_id)


def quota_limit(quotas: ClientQuotasImage, quota_type: QuotaType, tags: MetricTags) -> float | None:
    """The bound for ``tags`` (``DefaultQuotaCallback.quotaLimit``), None when unlimited."""
    key = quota_type.value
    user, client_id = tags
    if user and client_id:
        candidates: tuple[tuple[tuple[str, str | None], ...], ...] = (
            ((USER, user), (CLIENT_ID, client_id)),
            ((USER, user), (CLIENT_ID, None)),
            ((USER, None), (CLIENT_ID, client_id)),
            ((USER, None), (CLIENT_ID, None)),
        )
    elif user:
        candidates = (((USER, user),), ((USER, None),))
    else:
        # An empty client id still falls back to the default client-id quota.
        candidates = (((CLIENT_ID, client_id),), ((CLIENT_ID, None),))
    for parts in candidates:
        value = quotas.quotas(quota_entity(parts)).get(key)
        if value is not None:
            return value
    return None


def sensor_key(tags: MetricTags) -> bytes:
    """A fixed-size key for ``tags``: memory per rate stays bounded whatever the names' size."""
    user, client_id = tags
    text = f"{len(user)}:{user}{client_id}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(text, digest_size=16).digest()


class ClientQuotaManager:
    """One quota type's rates and throttle decisions (Kafka's ``ClientQuotaManager``)."""

    def __init__(self, quota_type: QuotaType, window: QuotaWindow | None = None) -> None:
        self.quota_type = quota_type
        self.window = window if window is not None else QuotaWindow()
        # Least recently used first. Invariant: at most MAX_QUOTA_SENSORS entries, each used
        # (last_used_ms) within INACTIVE_SENSOR_EXPIRATION_MS of the latest use.
        self._rates: OrderedDict[bytes, tuple[Rate, int]] = OrderedDict()
        # For /metrics: how many responses were throttled, and for how long in all.
        self.throttled_total = 0
        self.throttle_time_ms_total = 0
        # ``_applicable``'s memo: the image it holds for, and (user, client id) -> (tags, bound).
        # Invariant: at most MAX_RESOLVED_QUOTAS entries, all worked out from that image.
        self._resolved_for: ClientQuotasImage | None = None
        self._resolved: dict[tuple[str, str], tuple[MetricTags, float | None]] = {}

    def _applicable(
        self, quotas: ClientQuotasImage, user: str, client_id: str
    ) -> tuple[MetricTags, float | None]:
        """``quota_metric_tags`` and their ``quota_limit``: a pure function of the (immutable)
        image, so worked out once per client and image, not per request (8 entity lookups).
        Without any quota in the image (the usual case) nothing is looked up at all."""
        if not quotas.entities:
            return ("", client_id), None
        if self._resolved_for is not quotas:
            self._resolved_for, self._resolved = quotas, {}
        key = (user, client_id)
        found = self._resolved.get(key)
        if found is None:
            tags = quota_metric_tags(quotas, self.quota_type, user, client_id)
            found = (tags, quota_limit(quotas, self.quota_type, tags))
            if len(user) + len(client_id) <= MAX_RESOLVED_KEY_CHARS:
                if len(self._resolved) >= MAX_RESOLVED_QUOTAS:
                    self._resolved = {}
                self._resolved[key] = found
        return found

    def _rate(self, tags: MetricTags, now_ms: int) -> Rate:
        self._expire(now_ms)
        key = sensor_key(tags)
        entry = self._rates.pop(key, None)
        if entry is None:
            rate = Rate(samples=self.window.samples, window_ms=self.window.window_ms)
        else:
            rate = entry[0]
        self._rates[key] = (rate, now_ms)
        if len(self._rates) > MAX_QUOTA_SENSORS:
            self._rates.popitem(last=False)
        return rate

    def _expire(self, now_ms: int) -> None:
        """Drop the rates unused for INACTIVE_SENSOR_EXPIRATION_MS, oldest first."""
        while self._rates:
            _, last_used_ms = next(iter(self._rates.values()))
            if now_ms - last_used_ms < INACTIVE_SENSOR_EXPIRATION_MS:
                return
            self._rates.popitem(last=False)

    def sensor_count(self) -> int:
        return len(self._rates)

    def record_and_get_throttle_time_ms(
        self, quotas: ClientQuotasImage, user: str, client_id: str, value: float, now_ms: int
    ) -> int:
        """``maybeRecordAndGetThrottleTimeMs``: record ``value`` against the quota that applies
        and return how long to throttle (0: within quota, or no quota applies)."""
        tags, bound = self._applicable(quotas, user, client_id)
        if bound is None:
            return 0
        rate = self._rate(tags, now_ms)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle_ms = round((measured - bound) / bound * rate.window_size_ms(now_ms))
        if self.quota_type is QuotaType.REQUEST:
            throttle_ms = min(throttle_ms, self.window.window_ms)
        self.throttled_total += 1
        self.throttle_time_ms_total += throttle_ms
        return throttle_ms

    def unrecord(
        self, quotas: ClientQuotasImage, user: str, client_id: str, value: float, now_ms: int
    ) -> None:
        """``unrecordQuotaSensor``: take back a value whose response was not sent (a throttled
        fetch answers empty)."""
        tags, _ = self._applicable(quotas, user, client_id)
        entry = self._rates.get(sensor_key(tags))
        if entry is not None:
            entry[0].record(-value, now_ms)

    def max_value_in_quota_window(
        self, quotas: ClientQuotasImage, user: str, client_id: str
    ) -> float | None:
        """``getMaxValueInQuotaWindow``: the most one request may carry (a fetch's max bytes
        is bounded by it); None without a quota."""
        _, bound = self._applicable(quotas, user, client_id)
        if bound is None:
            return None
        return bound * (self.window.samples - 1) * self.window.window_ms / 1000.0
