"""Kafka's ``sasl.jaas.config`` value, read once for the broker, the tools and the Spark source.

``<LoginModule class> <flag> key="value" key=value ...;`` — one login module, as Kafka's
``sasl.jaas.config`` property takes it (``JaasConfig`` in Kafka's clients: the flag is one of
required, requisite, sufficient, optional; a quoted value may hold ``\\"`` escapes; the entry
ends with ``;``). Pure: the callers decide what the options mean (a broker listener's
``user_<name>`` passwords, a client's ``username``/``password``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

# One JAAS option: key=value or key="value" (a quoted value may hold \" escapes).
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:\\.|[^"\\])*)"|([^\s;"]+))')
_MODULE = re.compile(r"\s*([A-Za-z0-9_.$]+)\s+(required|requisite|sufficient|optional)\b", re.I)


class JaasConfigError(ValueError):
    """Names the property whose value could not be read; never quotes the value (passwords)."""

    def __init__(self, property_name: str, message: str) -> None:
        super().__init__(f"invalid value for {property_name}: {message}")
        self.property_name = property_name
        self.message = message


@attrs.frozen
class JaasConfig:
    login_module: str
    options: Mapping[str, str] = attrs.field(repr=False)


def parse_jaas_config(text: str, property_name: str) -> JaasConfig:
    """The login module and options of ``text``; ``JaasConfigError`` names ``property_name``."""
    module = _MODULE.match(text)
    if module is None:
        raise JaasConfigError(
            property_name, "expected '<LoginModule class> required key=\"value\" ...;'"
        )
    options: dict[str, str] = {}
    position = module.end()
    rest = text.rstrip()
    while position < len(rest) and rest[position:].strip() != ";":
        option = _OPTION.match(rest, position)
        if option is None:
            raise JaasConfigError(
                property_name, f"cannot parse the JAAS options from character {position}"
            )
        value = option[2] if option[2] is not None else option[3]
        options[option[1]] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
    if not rest.endswith(";"):
        raise JaasConfigError(property_name, "a JAAS entry ends with ';'")
    return JaasConfig(module[1], options)
