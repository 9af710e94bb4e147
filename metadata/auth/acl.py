"""Kafka's ACL vocabulary: resource types, pattern types, operations, permissions, bindings.

One ACL says *principal P from host H is ALLOWed/DENYed operation O on resources of type T
whose name matches pattern (N, LITERAL|PREFIXED)*. The enums carry Kafka's wire codes
(``org.apache.kafka.common.resource.ResourceType``, ``PatternType``,
``org.apache.kafka.common.acl.AclOperation``, ``AclPermissionType``) — the same numbers in the
metadata log (``AccessControlEntryRecord``), the HTTP contract and the Kafka protocol.

``AclBinding`` is one ACL (Kafka's ``AclBinding``/``StandardAcl``); ``AclBindingFilter`` selects
ACLs for DescribeAcls/DeleteAcls with Kafka's ``ResourcePatternFilter.matches`` and
``AccessControlEntryFilter.matches`` rules: ``ANY`` and ``None`` match anything, and the
pattern type ``MATCH`` selects every ACL that would apply to the named resource (the literal
name, the wildcard ``*`` and every prefix of the name). ``validate_new_acl`` and
``validate_filter`` are Kafka's ``AclControlManager`` checks. Pure values and functions.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.metadata.auth.principal import KafkaPrincipal, PrincipalError
from pykraft.metadata.records import AccessControlEntryRecord

# Kafka's ResourcePattern.WILDCARD_RESOURCE, AclEntry.WildcardPrincipalString, WildcardHost.
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
# The only name of the CLUSTER resource (Kafka's ResourcePattern / CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1  # filters only
    MATCH = 2  # filters only: every pattern that applies to the name
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclError(ValueError):
    """An ACL or filter Kafka refuses with INVALID_REQUEST; the message is Kafka's."""


@attrs.frozen(kw_only=True)
class AclBinding:
    """One ACL (Kafka's ``AclBinding``: a ``ResourcePattern`` and an ``AccessControlEntry``)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", or "User:*" for every user
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType

    def to_record(self, acl_id: str) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=acl_id,
            resource_type=self.resource_type.value,
            resource_name=self.resource_name,
            pattern_type=self.pattern_type.value,
            principal=self.principal,
            host=self.host,
            operation=self.operation.value,
            permission_type=self.permission_type.value,
        )

    @classmethod
    def from_record(cls, record: AccessControlEntryRecord) -> AclBinding:
        """Raises AclError for codes Kafka does not define (a record from a newer build)."""
        try:
            return cls(
                resource_type=ResourceType(record.resource_type),
                resource_name=record.resource_name,
                pattern_type=PatternType(record.pattern_type),
                principal=record.principal,
                host=record.host,
                operation=AclOperation(record.operation),
                permission_type=AclPermissionType(record.permission_type),
            )
        except ValueError as exc:
            raise AclError(str(exc)) from None


@attrs.frozen(kw_only=True)
class AclBindingFilter:
    """Kafka's ``AclBindingFilter``; ``None`` and ``ANY`` match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        # Kafka's ResourcePatternFilter.matches.
        if self.resource_type not in (ResourceType.ANY, acl.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, acl.pattern_type):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        return pattern_applies(acl.pattern_type, acl.resource_name, self.resource_name)

    def _matches_entry(self, acl: AclBinding) -> bool:
        # Kafka's AccessControlEntryFilter.matches.
        return (
            (self.principal is None or self.principal == acl.principal)
            and (self.host is None or self.host == acl.host)
            and self.operation in (AclOperation.ANY, acl.operation)
            and self.permission_type in (AclPermissionType.ANY, acl.permission_type)
        )


def pattern_applies(pattern_type: PatternType, pattern_name: str, resource_name: str) -> bool:
    """Does an ACL's pattern cover the resource named ``resource_name``? A literal pattern
    covers its own name, and ``*`` covers every name; a prefixed one every name it begins."""
    if pattern_type is PatternType.LITERAL:
        return pattern_name in (resource_name, WILDCARD_RESOURCE)
    if pattern_type is PatternType.PREFIXED:
        return resource_name.startswith(pattern_name)
    return False


def validate_new_acl(acl: AclBinding) -> None:
    """Kafka's ``AclControlManager.validateNewAcl`` (and the CLUSTER name rule of the broker's
    ``AclApis.handleCreateAcls``); raises AclError with Kafka's message. The principal must
    parse as ``<type>:<name>`` (Kafka only looks for the colon; ``User:`` is refused here too)."""
    if acl.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise AclError(f"Invalid resourceType {acl.resource_type.name}")
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise AclError(f"Invalid patternType {acl.pattern_type.name}")
    if acl.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclError(f"Invalid operation {acl.operation.name}")
    if acl.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        raise AclError(f"Invalid permissionType {acl.permission_type.name}")
    if not acl.resource_name:
        raise AclError("Resource name should not be empty")
    if acl.resource_type is ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    try:
        KafkaPrincipal.parse(acl.principal)
    except PrincipalError:
        raise AclError(
            f"Could not parse principal from `{acl.principal}` (no colon is present separating "
            "the principal type from the principal name)"
        ) from None


def validate_filter(acl_filter: AclBindingFilter) -> None:
    """Kafka's ``AclControlManager.validateFilter``: a filter with an UNKNOWN part matches
    nothing sensible and is refused."""
    if (
        acl_filter.resource_type is ResourceType.UNKNOWN
        or acl_filter.pattern_type is PatternType.UNKNOWN
    ):
        raise AclError("Unknown patternFilter.")
    if (
        acl_filter.operation is AclOperation.UNKNOWN
        or acl_filter.permission_type is AclPermissionType.UNKNOWN
    ):
        raise AclError("Unknown entryFilter.")
