"""ACLs for tests, written the way ``kafka-acls`` users read them."""

from __future__ import annotations

from pykraft.metadata.auth.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)


def acl(
    spec: str,
    operation: AclOperation,
    permission: str = "ALLOW",
    principal: str = "User:alice",
    host: str = "*",
    resource_type: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    """``spec`` is a LITERAL name (``foo``, ``*``) or ``prefix:<name>`` for a PREFIXED one."""
    pattern, name = (
        (PatternType.PREFIXED, spec.removeprefix("prefix:"))
        if spec.startswith("prefix:")
        else (PatternType.LITERAL, spec)
    )
    return AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=AclPermissionType[permission],
    )
