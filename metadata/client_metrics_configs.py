"""The CLIENT_METRICS config resource (KIP-714): a named metrics subscription.

Kafka's ``ClientMetricsConfigs``: a subscription (resource type 16, named by the operator) has
three keys — ``metrics`` (metric-name prefixes a matching client pushes), ``interval.ms`` (how
often it pushes, 100..3,600,000, default 300,000) and ``match`` (``selector=regex`` entries over
the client's ``client_instance_id``, ``client_id``, ``client_software_name``,
``client_software_version``, ``client_source_address`` and ``client_source_port``).
``validate_client_metrics`` is ``ClientMetricsConfigs.validate``: an empty subscription name or a
key not among the three is INVALID_REQUEST, an interval out of range is INVALID_REQUEST, a
malformed ``match`` entry or a regex that does not compile is INVALID_CONFIG (Kafka's
``InvalidConfigurationException``). The regex is compiled by Python's ``re``, which accepts
nearly the patterns ``java.util.regex`` does. pykraft stores subscriptions and describes them;
it has no telemetry receiver (GetTelemetrySubscriptions / PushTelemetry are not served), as
Kafka 3.9 without a ``ClientTelemetry`` reporter plugin.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pykraft.metadata.config_def import ConfigDef, ConfigType, config_defs
from pykraft.protocol.errors import Errors

SUBSCRIPTION_METRICS = "metrics"
PUSH_INTERVAL_MS = "interval.ms"
CLIENT_MATCH_PATTERN = "match"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
INTERVAL_MS_LOWER_BOUND = 100
INTERVAL_MS_UPPER_BOUND = 3_600_000

# ClientMetricsConfigs.ALLOWED_MATCH_PARAMS.
MATCH_SELECTORS = frozenset(
    {
        "client_instance_id",
        "client_id",
        "client_software_name",
        "client_software_version",
        "client_source_address",
        "client_source_port",
    }
)

CLIENT_METRICS_CONFIGS: Mapping[str, ConfigDef] = config_defs(
    ConfigDef(
        SUBSCRIPTION_METRICS,
        ConfigType.LIST,
        "",
        documentation="Subscription metrics list: metric-name prefixes; '*' is every metric.",
    ),
    ConfigDef(
        PUSH_INTERVAL_MS,
        ConfigType.INT,
        str(DEFAULT_INTERVAL_MS),
        documentation="Push interval in milliseconds.",
    ),
    ConfigDef(
        CLIENT_MATCH_PATTERN,
        ConfigType.LIST,
        "",
        documentation="Client match pattern list: selector=regex entries.",
    ),
)


def validate_client_metrics(
    subscription_name: str, configs: Mapping[str, str]
) -> tuple[Errors, str] | None:
    """Kafka's ``ClientMetricsConfigs.validate`` of a subscription's resulting configs; None if
    valid, else the error and Kafka's message."""
    if subscription_name == "":
        return Errors.INVALID_REQUEST, "Subscription name can't be empty"
    for name in configs:
        if name not in CLIENT_METRICS_CONFIGS:
            return Errors.INVALID_REQUEST, f"Unknown client metrics configuration: {name}"
    interval = configs.get(PUSH_INTERVAL_MS)
    if interval is not None:
        problem = _interval_problem(interval)
        if problem is not None:
            return Errors.INVALID_REQUEST, problem
    patterns = configs.get(CLIENT_MATCH_PATTERN)
    if patterns:
        problem = match_patterns_problem(patterns.split(","))
        if problem is not None:
            return Errors.INVALID_CONFIG, problem
    return None


def _interval_problem(raw: str) -> str | None:
    text = raw.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        # Kafka's Integer.parseInt would fail here; say what is wrong instead.
        return f"Invalid value {raw} for {PUSH_INTERVAL_MS}, interval must be an integer"
    value = int(text)
    if INTERVAL_MS_LOWER_BOUND <= value <= INTERVAL_MS_UPPER_BOUND:
        return None
    return (
        f"Invalid value {value} for {PUSH_INTERVAL_MS}, interval must be between 100 and "
        "3600000 (1 hour)"
    )


def match_patterns_problem(patterns: list[str]) -> str | None:
    """Kafka's ``ClientMetricsConfigs.parseMatchingPatterns``: each ``selector=regex`` has one
    ``=``, a known selector, and a regex that compiles."""
    for pattern in patterns:
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()  # Java's String.split drops trailing empty strings
        if len(parts) != 2 or parts[0].strip() not in MATCH_SELECTORS:
            return f"Illegal client matching pattern: {pattern}"
        try:
            re.compile(parts[1].strip())
        except re.error:
            return f"Illegal regex pattern: {parts[1]}"
    return None
