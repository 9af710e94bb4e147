"""Kafka's ``ConfigDef`` as pykraft needs it: a key's type, default, validator and
documentation, and ``parse`` with Kafka's ``ConfigException`` messages (pure).

The tables of keys are ``config_defs.py`` (topics) and ``broker_config_defs.py`` (brokers).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping

import attrs

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type``; ``wire_id`` is DescribeConfigs v3+'s ``config_type``."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    SHORT = "SHORT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"

    @property
    def wire_id(self) -> int:
        # DescribeConfigsResponse.ConfigType: UNKNOWN 0, BOOLEAN 1, ..., PASSWORD 9.
        return list(ConfigType).index(self) + 1


class ConfigError(ValueError):
    """A value does not parse or is out of range; str() is Kafka's ``ConfigException`` text."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        super().__init__(f"Invalid value {value} for configuration {name}: {reason}")


@attrs.frozen
class ConfigDef:
    """One key of Kafka's ``ConfigDef``: type, default (None: no default), validator, doc."""

    name: str
    type: ConfigType
    default: str | None
    at_least: float | None = None
    at_most: float | None = None
    # For STRING: the value must be one of these; for LIST: every element must be.
    valid_strings: tuple[str, ...] = ()
    documentation: str = ""
    # A broker key pykraft changes at run time (DynamicBrokerConfig); topic keys all are.
    dynamic: bool = True

    @property
    def sensitive(self) -> bool:
        """Kafka's ``KafkaConfig.maybeSensitive``: passwords are never described."""
        return self.type is ConfigType.PASSWORD

    def parse(self, raw: str) -> object:
        """Parse and validate ``raw``; raises ConfigError with Kafka's message."""
        value = _parse(self, raw)
        self._check(value)
        return value

    def _check(self, value: object) -> None:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if self.at_least is not None and value < self.at_least:
                raise ConfigError(self.name, value, f"Value must be at least {_num(self.at_least)}")
            if self.at_most is not None and value > self.at_most:
                raise ConfigError(
                    self.name, value, f"Value must be no more than {_num(self.at_most)}"
                )
        if self.valid_strings:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if item not in self.valid_strings:
                    raise ConfigError(
                        self.name, item, "String must be one of: " + ", ".join(self.valid_strings)
                    )


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else str(bound)


def _parse(definition: ConfigDef, raw: str) -> object:
    # Kafka's ConfigDef.parseType: values are trimmed; numbers must fit the Java type.
    text = raw.strip()
    kind = definition.type
    if kind is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigError(definition.name, raw, "Expected value to be either true or false")
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        low, high = (_INT_MIN, _INT_MAX) if kind is not ConfigType.LONG else (_LONG_MIN, LONG_MAX)
        if _INTEGER.fullmatch(text) and low <= int(text) <= high:
            return int(text)
        raise ConfigError(definition.name, raw, f"Not a number of type {kind.value}")
    if kind is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(definition.name, raw, "Not a number of type DOUBLE") from None
    if kind is ConfigType.LIST:
        return [] if not text else [part.strip() for part in text.split(",")]
    return text


def config_defs(*definitions: ConfigDef) -> Mapping[str, ConfigDef]:
    return {definition.name: definition for definition in definitions}
