"""The authorizer: may this principal, from this host, do this operation on this resource?

Kafka's ``StandardAuthorizer`` (``StandardAuthorizerData.authorize``) over the ACLs of one
metadata image, as a pure value: build it once per ``AclsImage`` (``Authorizer.of``) and ask it
anything; brokers and controllers rebuild it when the image's ACLs change. The rules, in order:

1. A principal listed in ``super.users`` is allowed everything.
2. The ACLs that apply are those whose pattern covers the resource (a LITERAL pattern with the
   resource's name or the wildcard ``*``, or a PREFIXED pattern the name begins with), whose
   principal is the caller's or ``User:*``, and whose host is the caller's or ``*``.
3. Among those, a DENY of the operation (or of ALL) wins over any ALLOW.
4. An ALLOW of the operation (or of ALL) allows; an ALLOW also implies some operations:
   READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. Implied
   operations apply to ALLOW only: denying READ does not deny DESCRIBE.
5. Otherwise: denied, unless no ACL at all (of any principal) covers the resource and
   ``allow.everyone.if.no.acl.found`` is true (default false).

``authorized_operations`` is KIP-430's answer for Metadata / DescribeCluster / DescribeGroups:
the operations of the resource type's supported set (Kafka's ``AclEntry.supportedOperations``)
that ``authorize`` allows; ``operations_bitfield`` encodes it as Kafka's
``Utils.to32BitField``. ``authorize_by_resource_type`` is Kafka's
``Authorizer.authorizeByResourceType`` (KIP-679: may the principal do the operation on *some*
resource of the type, e.g. IDEMPOTENT_WRITE through any transactional id).

Lookups cost one dict probe per prefix of the resource name, not a scan of every ACL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs

from pykraft.metadata.auth.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.images import AclsImage
from pykraft.metadata.auth.principal import KafkaPrincipal

# What an ALLOW of each ACL operation also allows (Kafka's StandardAuthorizerData
# IMPLIES_DESCRIBE / IMPLIES_DESCRIBE_CONFIGS).
_IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# Kafka's AclEntry.supportedOperations(resourceType): what KIP-430 reports on.
SUPPORTED_OPERATIONS: Mapping[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DESCRIBE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset({AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.CREATE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

# The resource name Kafka's authorizeByResourceType asks about to apply super.users and
# allow.everyone.if.no.acl.found ("hardcode" in Kafka's Authorizer).
_PROBE_NAME = "hardcode"


@attrs.frozen
class AuthorizerSettings:
    """``super.users`` (principals, e.g. ``User:admin``) and
    ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_config(
        cls, super_users: str = "", allow_everyone_if_no_acl_found: bool = False
    ) -> AuthorizerSettings:
        """``super.users`` as Kafka writes it: principals separated by ``;``."""
        names = frozenset(part.strip() for part in super_users.split(";") if part.strip())
        return cls(names, allow_everyone_if_no_acl_found)


def operations_bitfield(operations: Iterable[int]) -> int:
    """KIP-430's ``authorizedOperations`` int32: bit ``code`` set per operation (an
    ``AclOperation`` or its code)."""
    return sum(1 << int(operation) for operation in set(operations))


@attrs.frozen
class Authorizer:
    """Kafka's ``StandardAuthorizer`` over one image's ACLs (see the module docstring)."""

    settings: AuthorizerSettings
    # (resource type, pattern type, pattern name) -> the ACLs with that pattern.
    patterns: Mapping[tuple[ResourceType, PatternType, str], tuple[AclBinding, ...]]
    # The longest PREFIXED pattern per resource type: prefixes longer than it cannot match.
    longest_prefix: Mapping[ResourceType, int]

    @classmethod
    def of(cls, acls: AclsImage | Iterable[AclBinding], settings: AuthorizerSettings) -> Authorizer:
        bindings = acls.acls.values() if isinstance(acls, AclsImage) else acls
        patterns: dict[tuple[ResourceType, PatternType, str], list[AclBinding]] = {}
        longest: dict[ResourceType, int] = {}
        for acl in bindings:
            key = (acl.resource_type, acl.pattern_type, acl.resource_name)
            patterns.setdefault(key, []).append(acl)
            if acl.pattern_type is PatternType.PREFIXED:
                longest[acl.resource_type] = max(
                    longest.get(acl.resource_type, 0), len(acl.resource_name)
                )
        return cls(settings, {k: tuple(v) for k, v in patterns.items()}, longest)

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.settings.super_users

    def authorize(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """True when allowed (rules 1-5 of the module docstring)."""
        assert operation not in (AclOperation.ANY, AclOperation.UNKNOWN), operation
        if self.is_super_user(principal):
            return True
        covering = self._covering(resource_type, resource_name)
        if not covering:
            return self.settings.allow_everyone_if_no_acl_found
        allowed = False
        for acl in _applying(covering, principal, host):
            if acl.permission_type is AclPermissionType.DENY:
                if acl.operation in (AclOperation.ALL, operation):
                    return False
            elif _allow_covers(acl.operation, operation):
                allowed = True
        return allowed

    def authorized_operations(
        self,
        principal: KafkaPrincipal,
        host: str,
        resource_type: ResourceType,
        resource_name: str,
    ) -> frozenset[AclOperation]:
        """KIP-430: the supported operations on the resource this principal may do."""
        return frozenset(
            operation
            for operation in SUPPORTED_OPERATIONS.get(resource_type, frozenset())
            if self.authorize(principal, host, operation, resource_type, resource_name)
        )

    def authorize_by_resource_type(
        self,
        principal: KafkaPrincipal,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
    ) -> bool:
        """Kafka's ``Authorizer.authorizeByResourceType``: True when some resource of the type
        would be allowed — an ALLOW (of the operation or ALL) whose pattern no DENY covers."""
        if self.authorize(principal, host, operation, resource_type, _PROBE_NAME):
            return True
        applying = [
            acl
            for (kind, _, _), acls in self.patterns.items()
            if kind is resource_type
            for acl in _applying(acls, principal, host)
            if acl.operation in (AclOperation.ALL, operation)
        ]
        denies = [a for a in applying if a.permission_type is AclPermissionType.DENY]
        if any(_is_wildcard(a) for a in denies):
            return False
        return any(
            not any(_deny_covers(deny, allow) for deny in denies)
            for allow in applying
            if allow.permission_type is AclPermissionType.ALLOW
        )

    def _covering(self, resource_type: ResourceType, resource_name: str) -> list[AclBinding]:
        """Every ACL whose pattern covers the resource, whatever its principal."""
        found: list[AclBinding] = []
        for name in {resource_name, WILDCARD_RESOURCE}:
            found.extend(self.patterns.get((resource_type, PatternType.LITERAL, name), ()))
        longest = min(self.longest_prefix.get(resource_type, 0), len(resource_name))
        for length in range(1, longest + 1):
            key = (resource_type, PatternType.PREFIXED, resource_name[:length])
            found.extend(self.patterns.get(key, ()))
        return found


def _applying(
    acls: Iterable[AclBinding], principal: KafkaPrincipal, host: str
) -> Iterable[AclBinding]:
    name = str(principal)
    for acl in acls:
        if acl.principal in (name, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD_HOST):
            yield acl


def _allow_covers(acl_operation: AclOperation, operation: AclOperation) -> bool:
    if acl_operation in (AclOperation.ALL, operation):
        return True
    if operation is AclOperation.DESCRIBE:
        return acl_operation in _IMPLIES_DESCRIBE
    if operation is AclOperation.DESCRIBE_CONFIGS:
        return acl_operation in _IMPLIES_DESCRIBE_CONFIGS
    return False


def _is_wildcard(acl: AclBinding) -> bool:
    return acl.pattern_type is PatternType.LITERAL and acl.resource_name == WILDCARD_RESOURCE


def _deny_covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does the DENY cover every resource the ALLOW's pattern names (Kafka's
    authorizeByResourceType: a denied literal name or a denied prefix of the allowed one)?"""
    if deny.pattern_type is PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name)
    return allow.pattern_type is PatternType.LITERAL and allow.resource_name == deny.resource_name
