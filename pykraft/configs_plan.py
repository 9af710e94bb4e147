"""``pykraft configs`` (kafka-configs.sh) as values (pure): Kafka 3.9's ``ConfigCommand`` argument
rules, ``--add-config`` parsing and ``--describe`` lines.

* ``--add-config 'k1=v1,k2=[a,b],k3='``: pairs split on the commas outside brackets, the brackets
  dropped from the values, an empty value kept (``parseConfigsToBeAdded``); ``--add-config-file``
  properties come first and ``--add-config`` wins over them;
* ``--delete-config k1,k2`` (``parseConfigsToBeDeleted``);
* a user's ``SCRAM-SHA-256=[iterations=8192,password=secret]`` (``iterationsAndPasswordBytes``,
  4096 iterations by default, KIP-554);
* ``--describe``: "Dynamic configs for topic t are:" (``All`` with ``--all``; "Default configs for
  brokers in the cluster are:" for ``--entity-default``), then ``  k=v sensitive=false
  synonyms={SOURCE:k=v, ...}`` per entry sorted by name, only the entity's own dynamic entries
  unless ``--all`` (``getResourceConfig``'s source filter);
* ``--alter``: "Completed updating config for topic t." / "Completed updating default config for
  brokers in the cluster." (``alterConfig``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

TOPICS, BROKERS, BROKER_LOGGERS, USERS, CLIENTS, CLIENT_METRICS = (
    "topics", "brokers", "broker-loggers", "users", "clients", "client-metrics",
)  # fmt: skip
ENTITY_TYPES = (TOPICS, CLIENTS, USERS, BROKERS, BROKER_LOGGERS, CLIENT_METRICS)
# The source of an entity's own dynamic entries (getResourceConfig); None: every entry.
DYNAMIC_SOURCE: dict[str, str | None] = {
    TOPICS: "DYNAMIC_TOPIC_CONFIG",
    BROKERS: "DYNAMIC_BROKER_CONFIG",
    BROKER_LOGGERS: None,
    CLIENT_METRICS: "DYNAMIC_CLIENT_METRICS_CONFIG",
}
DEFAULT_BROKER_SOURCE = "DYNAMIC_DEFAULT_BROKER_CONFIG"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_SCRAM_ITERATIONS = 4096  # Kafka's ConfigCommand.DefaultScramIterations
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)


class ConfigsError(ValueError):
    """A bad option or value: printed on stderr as Kafka prints it, exit status 1."""


@attrs.frozen
class ConfigEntry:
    name: str
    value: str | None
    source: str
    sensitive: bool = False
    synonyms: tuple[tuple[str, str, str | None], ...] = ()  # (source, name, value)


@attrs.frozen
class ScramUpsertion:
    mechanism: str
    iterations: int
    password: str = attrs.field(repr=False)


def parse_add_config(text: str) -> dict[str, str]:
    """``--add-config``'s pairs (Kafka's ``parseConfigsToBeAdded``)."""
    items = re.split("," + _OUTSIDE_BRACKETS, text)
    while items and items[-1] == "":
        items.pop()  # Java's String.split drops trailing empty strings
    configs = {}
    for item in items:
        pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(pair) != 2:
            raise ConfigsError(
                'Invalid entity config: all configs to be added must be in the format "key=val" '
                'or  "key=[val1,val2]" to group values which contain commas.'
            )
        configs[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return configs


def parse_delete_config(values: Sequence[str]) -> list[str]:
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def check_args(
    describe: bool,
    alter: bool,
    entity_type: str | None,
    entity_name: str | None,
    entity_default: bool,
    has_changes: bool,
) -> None:
    """``ConfigCommandOptions.checkArgs``, for the entity types pykraft's tool serves."""
    if describe == alter:
        raise ConfigsError("Command must include exactly one action: --describe, --alter")
    if entity_type is None:
        raise ConfigsError("At least one entity type must be specified")
    if entity_type not in ENTITY_TYPES:
        raise ConfigsError(f"Invalid entity type {entity_type}, the entity type must be one of "
                           f"{', '.join(ENTITY_TYPES)}")  # fmt: skip
    if entity_name is not None and entity_default:
        raise ConfigsError("--entity-name and --entity-default cannot be used together")
    if entity_default and entity_type in (TOPICS, BROKER_LOGGERS, CLIENT_METRICS):
        raise ConfigsError(
            "--entity-default is only valid with --entity-type brokers, users or clients"
        )
    if alter:
        if entity_type in (USERS, CLIENTS) and entity_name is None and not entity_default:
            raise ConfigsError(
                "an entity-name or default entity must be specified with --alter of users, "
                "clients, ips"
            )
        if entity_type not in (USERS, CLIENTS, BROKERS) and entity_name is None:
            raise ConfigsError(f"an entity name must be specified with --alter of {entity_type}")
        if entity_type == BROKERS and entity_name is None and not entity_default:
            raise ConfigsError(
                "an entity name or default entity must be specified with --alter of brokers"
            )
        if not has_changes:
            raise ConfigsError(
                "At least one of --add-config, --add-config-file, or --delete-config must be "
                "specified with --alter"
            )


def describe_lines(
    entity_type: str, entity: str, entries: Sequence[ConfigEntry], describe_all: bool
) -> list[str]:
    """Kafka's ``describeResourceConfig`` for one entity ("" is the brokers' default)."""
    if entity == "":
        lines = [f"Default configs for {entity_type} in the cluster are:"]
        source: str | None = DEFAULT_BROKER_SOURCE
    else:
        kind = "All" if describe_all else "Dynamic"
        lines = [f"{kind} configs for {entity_type[:-1]} {entity} are:"]
        source = DYNAMIC_SOURCE[entity_type]
    shown = [e for e in entries if describe_all or source is None or e.source == source]
    for entry in sorted(shown, key=lambda e: e.name):
        synonyms = ", ".join(f"{s}:{n}={_java(v)}" for s, n, v in entry.synonyms)
        lines.append(
            f"  {entry.name}={_java(entry.value)} sensitive={_java(entry.sensitive)} "
            f"synonyms={{{synonyms}}}"
        )
    return lines


def _java(value: object) -> str:
    """A value as Java's string concatenation prints it (null, true/false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def missing_deletions(to_delete: Sequence[str], current: Mapping[str, object]) -> None:
    """Kafka refuses to delete a config the entity does not set (``alterResourceConfig``)."""
    invalid = [name for name in to_delete if name not in current]
    if invalid:
        raise ConfigsError(f"Invalid config(s): {','.join(invalid)}")


def completed_line(entity_type: str, entity_name: str | None) -> str:
    if entity_name:
        return f"Completed updating config for {entity_type[:-1]} {entity_name}."
    return f"Completed updating default config for {entity_type} in the cluster."


def scram_upsertions(configs: Mapping[str, str]) -> list[ScramUpsertion]:
    """The SCRAM mechanisms of a user's ``--add-config``; other keys are client quotas."""
    upsertions = []
    for mechanism, credential in configs.items():
        if mechanism not in SCRAM_MECHANISMS:
            continue
        match = _CREDENTIAL.fullmatch(credential)
        if match is None:
            raise ConfigsError(
                f"Invalid credential property {mechanism}=<hidden>: the value must be "
                "[iterations=N,password=P] or [password=P]"
            )
        iterations = int(match.group(1)) if match.group(1) else DEFAULT_SCRAM_ITERATIONS
        upsertions.append(ScramUpsertion(mechanism, iterations, match.group(2)))
    return upsertions


def scram_description_line(user: str, credentials: Sequence[tuple[str, int]]) -> str:
    """``describeClientQuotaAndUserScramCredentialConfigs``' SCRAM line."""
    text = ", ".join(
        f"{mechanism}=iterations={iterations}" for mechanism, iterations in credentials
    )
    return f"SCRAM credential configs for user-principal '{user}' are {text}"


# Kafka's ClientQuotaEntity types and how ConfigCommand names them.
QUOTA_ENTITY_TYPES = {USERS: "user", CLIENTS: "client-id"}
_QUOTA_NAMES = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}


def java_double(value: float) -> str:
    """A quota's value as Java's ``Double.toString`` prints it: ``1000.0``, ``0.5``, ``1.0E7``."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else text.replace("e", "E")
    exponent = len(str(int(abs(value)))) - 1 if abs(value) >= 1 else 0
    if abs(value) < 1:
        exponent = -1
        while abs(value) * 10 ** (-exponent) < 1:
            exponent -= 1
    mantissa = repr(round(value / 10**exponent, 15))
    return f"{mantissa}E{exponent}"


def quota_values(configs: Mapping[str, str]) -> dict[str, float]:
    """A quota alteration's values (``alterQuotaConfigs``: each must parse as a double)."""
    values = {}
    for key, value in configs.items():
        try:
            values[key] = float(value)
        except ValueError:
            raise ConfigsError(
                f"Cannot parse quota configuration value for {key}: {value}"
            ) from None
    return values


def quota_lines(
    entries: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]],
) -> list[str]:
    """``describeQuotaConfigs``: "Quota configs for user-principal 'u', client-id 'c' are k=v"."""
    lines = []
    for entity, values in entries.items():
        named = dict(entity)
        parts = [
            f"{_QUOTA_NAMES[kind]} '{named[kind]}'" if named[kind] is not None
            else f"the default {_QUOTA_NAMES[kind]}"
            for kind in ("user", "client-id", "ip")
            if kind in named
        ]  # fmt: skip
        text = ", ".join(f"{key}={java_double(value)}" for key, value in values.items())
        lines.append(f"Quota configs for {', '.join(parts)} are {text}")
    return lines
