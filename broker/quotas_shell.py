"""The broker's client quotas: the pure managers (``broker.quotas``) fed the metadata image's
``ClientQuotasImage``, the broker's clock, and the connections they mute.

Handlers call ``record_produce`` with a Produce request's size (Kafka's
``KafkaApis.handleProduceRequest``: ``quotas.produce.maybeRecordAndGetThrottleTimeMs(request,
requestSize)``) and ``record_fetch`` with a consumer Fetch response's size
(``handleFetchRequest``; followers are not client-quota'd). A throttle is returned for the
response's ``throttle_time_ms`` and recorded in ``ChannelThrottles`` so the listener mutes the
connection for as long (KIP-219). A throttled fetch is answered empty, its bytes taken back
(``unrecordQuotaSensor``). Users are principal names (``User:ANONYMOUS`` is ``ANONYMOUS``);
an absent client id is "". ``record_request`` holds every request's handler time to
``request_percentage`` (KIP-124; ``KafkaApis.request_quota``, the time measured by
``broker.request_time``). Throttles are counted on ``/metrics``
(``pykraft_client_quota_throttles_total`` and ``..._throttle_time_ms_total``, by quota type).
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.network import RequestContext
from pykraft.broker.quotas import (
    NANOS_TO_PERCENTAGE_PER_SECOND,
    ClientQuotaManager,
    QuotaType,
    QuotaWindow,
)
from pykraft.broker.quotas_channel import ChannelThrottles
from pykraft.metadata.client_quotas import ClientQuotasImage
from pykraft.protocol.api_keys import ApiKey

# Requests only brokers send (cluster actions): never held to a client's request quota.
EXEMPT_API_KEYS = frozenset({ApiKey.WRITE_TXN_MARKERS})


class ClientQuotas:
    def __init__(
        self,
        quotas: Callable[[], ClientQuotasImage],
        monotonic_ms: Callable[[], int],
        throttles: ChannelThrottles,
        *,
        window: QuotaWindow | None = None,
        metrics: BrokerMetrics | None = None,
    ) -> None:
        self._quotas = quotas
        self._monotonic_ms = monotonic_ms
        self.throttles = throttles
        self._metrics = metrics
        self.produce = ClientQuotaManager(QuotaType.PRODUCE, window)
        self.fetch = ClientQuotaManager(QuotaType.FETCH, window)
        self.request = ClientQuotaManager(QuotaType.REQUEST, window)

    @staticmethod
    def _who(context: RequestContext) -> tuple[str, str]:
        return context.principal.name, context.header.client_id or ""

    def _throttle(self, context: RequestContext, quota_type: QuotaType, throttle_ms: int) -> int:
        if throttle_ms > 0:
            self.throttles.throttle(context.connection_id, self._monotonic_ms() + throttle_ms)
            if self._metrics is not None:
                self._metrics.record_client_quota_throttle(quota_type.name.lower(), throttle_ms)
        return throttle_ms

    def record_produce(self, context: RequestContext, request_bytes: int) -> int:
        """Record a Produce request's bytes; the throttle time (0: within quota)."""
        user, client_id = self._who(context)
        throttle_ms = self.produce.record_and_get_throttle_time_ms(
            self._quotas(), user, client_id, request_bytes, self._monotonic_ms()
        )
        return self._throttle(context, QuotaType.PRODUCE, throttle_ms)

    def record_request(self, context: RequestContext, handler_nanos: int) -> int:
        """Record a request's handler time as a percentage of one thread against
        ``request_percentage`` (``ClientRequestQuotaManager``); the throttle, at most one quota
        window. The brokers' own requests (WriteTxnMarkers, AddPartitionsToTxn v4+) are exempt,
        as Kafka answers cluster actions with ``sendResponseExemptThrottle``."""
        header = context.header
        if header.api_key in EXEMPT_API_KEYS or (
            header.api_key == ApiKey.ADD_PARTITIONS_TO_TXN and header.api_version >= 4
        ):
            return 0
        user, client_id = self._who(context)
        throttle_ms = self.request.record_and_get_throttle_time_ms(
            self._quotas(),
            user,
            client_id,
            handler_nanos * NANOS_TO_PERCENTAGE_PER_SECOND,
            self._monotonic_ms(),
        )
        return self._throttle(context, QuotaType.REQUEST, throttle_ms)

    def max_fetch_bytes(self, context: RequestContext) -> int | None:
        """The most a consumer Fetch may return under its quota (``KafkaApis``:
        ``fetchMaxBytes`` is bounded by ``quotas.fetch.getMaxValueInQuotaWindow``); None
        without a quota."""
        user, client_id = self._who(context)
        bound = self.fetch.max_value_in_quota_window(self._quotas(), user, client_id)
        return None if bound is None else int(bound)

    def record_fetch(
        self, context: RequestContext, response_bytes: int, request_throttle_ms: int = 0
    ) -> int:
        """Record a consumer Fetch response's bytes; the larger of its throttle and the request
        quota's. When either throttles (> 0) the bytes are taken back, for the caller answers
        empty (``handleFetchRequest``: "unrecord the already recorded value")."""
        user, client_id = self._who(context)
        quotas, now_ms = self._quotas(), self._monotonic_ms()
        throttle_ms = self.fetch.record_and_get_throttle_time_ms(
            quotas, user, client_id, response_bytes, now_ms
        )
        if max(throttle_ms, request_throttle_ms) > 0:
            self.fetch.unrecord(quotas, user, client_id, response_bytes, now_ms)
        return max(self._throttle(context, QuotaType.FETCH, throttle_ms), request_throttle_ms)
