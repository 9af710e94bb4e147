"""Kafka's ``KafkaPrincipal`` and how a TLS peer certificate becomes one.

Every door — a Kafka listener, the controllers' HTTP API, a replication fetch — ends its
authentication with one ``KafkaPrincipal``, and the authorizer decides on that alone, so the
rules live here once, for brokers and controllers alike:

* PLAINTEXT: ``User:ANONYMOUS`` (Kafka's ``KafkaPrincipal.ANONYMOUS``).
* SASL: ``User:<authorization id>`` — the user name the mechanism proved.
* SSL with a client certificate: ``User:<mapped subject DN>``. Kafka's
  ``DefaultKafkaPrincipalBuilder`` takes the subject as an RFC 2253 string (most specific
  attribute first: ``CN=alice,OU=eng,O=acme``) and passes it through
  ``ssl.principal.mapping.rules`` (``SslPrincipalMapper``, KIP-371): rules are tried in order,
  ``DEFAULT`` keeps the DN as it is, ``RULE:<regex>/<replacement>/[L|U]`` applies to a DN the
  regex matches in full, ``$1``-style groups in the replacement, then lower or upper case.
  No rule matching is an error (Kafka: "No rules apply to <dn>, rules [...]"); the connection
  is refused.
* SSL without a client certificate (``ssl.client.auth=none``/``requested``): ``User:ANONYMOUS``.

Pure: the certificate arrives as DER bytes (``SSLObject.getpeercert(binary_form=True)``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs
from cryptography import x509

USER_TYPE = "User"
DEFAULT_RULES = ("DEFAULT",)
# Kafka's SslPrincipalMapper grammar: DEFAULT, or RULE:pattern/replacement/ with an optional
# L or U; rules are separated by commas outside a rule (a pattern may itself hold commas).
_RULE = re.compile(r"\s*(DEFAULT|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(?:,|$)")


class PrincipalError(ValueError):
    """A principal that cannot be parsed, or a DN no mapping rule applies to."""


@attrs.frozen(order=True)
class KafkaPrincipal:
    """``<type>:<name>``, e.g. ``User:alice`` (Kafka's ``KafkaPrincipal``)."""

    principal_type: str
    name: str
    # Authenticated with a delegation token (KIP-48); like Kafka's KafkaPrincipal, not part of
    # equality: the token's owner is the principal.
    token_authenticated: bool = attrs.field(default=False, eq=False, order=False, repr=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` -> ``KafkaPrincipal("User", "alice")`` (Kafka's
        ``SecurityUtils.parseKafkaPrincipal``: the type is everything before the first colon;
        both parts must be non-empty)."""
        principal_type, colon, name = text.partition(":")
        if not colon or not principal_type or not name:
            raise PrincipalError(
                f"Principal {text!r} is not of the form <type>:<name>, e.g. User:alice"
            )
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


@attrs.frozen
class MappingRule:
    """One entry of ``ssl.principal.mapping.rules``; ``pattern`` None is ``DEFAULT``."""

    pattern: re.Pattern[str] | None
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        mapped = match.expand(self.replacement)
        return (
            mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" else mapped
        )


def parse_mapping_rules(text: str) -> tuple[MappingRule, ...]:
    """``ssl.principal.mapping.rules`` -> rules; a clear ``PrincipalError`` for a bad one."""
    rules: list[MappingRule] = []
    position = 0
    text = text.strip()
    while position < len(text):  # each round consumes at least one rule
        match = _RULE.match(text, position)
        if match is None or match.end() == position:
            raise PrincipalError(
                f"ssl.principal.mapping.rules: cannot parse {text[position:]!r}; expected DEFAULT "
                "or RULE:<pattern>/<replacement>/[L|U]"
            )
        if match[1] == "DEFAULT":
            rules.append(MappingRule(None))
        else:
            pattern = match[2].replace("\\/", "/")
            # Java's $1 group references -> Python's \1.
            replacement = re.sub(r"\$(\d+)", r"\\\1", match[3].replace("\\/", "/"))
            try:
                rules.append(MappingRule(re.compile(pattern), replacement, match[4] or ""))
            except re.error as error:
                raise PrincipalError(
                    f"ssl.principal.mapping.rules: bad pattern {pattern!r}: {error}"
                ) from None
        position = match.end()
    return tuple(rules) if rules else tuple(parse_mapping_rules("DEFAULT"))


def subject_dn(certificate_der: bytes) -> str:
    """The certificate's subject as RFC 2253/4514 text, most specific attribute first."""
    try:
        certificate = x509.load_der_x509_certificate(certificate_der)
    except ValueError as error:
        raise PrincipalError(f"The peer certificate cannot be read: {error}") from None
    return certificate.subject.rfc4514_string()


def map_dn(dn: str, rules: Sequence[MappingRule]) -> str:
    for rule in rules:
        mapped = rule.apply(dn)
        if mapped is not None:
            return mapped
    raise PrincipalError(f"No rules apply to {dn}, rules {[str(r.pattern) for r in rules]}")


def principal_from_certificate(
    certificate_der: bytes | None, rules: Sequence[MappingRule]
) -> KafkaPrincipal:
    """The principal of a TLS peer: its mapped subject DN, or ANONYMOUS without a certificate."""
    if certificate_der is None:
        return ANONYMOUS
    return user(map_dn(subject_dn(certificate_der), rules))
