"""The authorizer as a table: principal x pattern x operation x ACL set -> decision.

Cases mirror Kafka's ``StandardAuthorizerTest`` and ``AclAuthorizerTest`` (named per case).
"""

from __future__ import annotations

import pytest

from pykraft.metadata.auth.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.authorizer import (
    Authorizer,
    AuthorizerSettings,
    operations_bitfield,
)
from pykraft.metadata.auth.principal import KafkaPrincipal

Op = AclOperation
T = ResourceType
ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "192.168.0.1"
DEFAULTS = AuthorizerSettings()


def acl(
    spec: str,
    operation: AclOperation,
    permission: str = "ALLOW",
    principal: str = "User:alice",
    host: str = "*",
    resource_type: ResourceType = T.TOPIC,
) -> AclBinding:
    """``spec`` is ``name`` (LITERAL) or ``name*`` with ``prefix:`` for PREFIXED."""
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


def check(
    acls: list[AclBinding],
    operation: AclOperation,
    resource: str,
    expected: bool,
    *,
    principal: KafkaPrincipal = ALICE,
    host: str = HOST,
    settings: AuthorizerSettings = DEFAULTS,
    resource_type: ResourceType = T.TOPIC,
) -> None:
    authorizer = Authorizer.of(acls, settings)
    got = authorizer.authorize(principal, host, operation, resource_type, resource)
    assert got is expected, (acls, operation, resource)


CASES = [
    # StandardAuthorizerTest.testSimpleAuthorizations: literal allow, another topic untouched.
    ([acl("foo", Op.READ)], Op.READ, "foo", True),
    ([acl("foo", Op.READ)], Op.READ, "foobar", False),
    ([acl("foo", Op.READ)], Op.WRITE, "foo", False),
    # testListAcls / prefixed: a PREFIXED pattern covers every name it begins.
    ([acl("prefix:foo", Op.READ)], Op.READ, "foobar", True),
    ([acl("prefix:foo", Op.READ)], Op.READ, "foo", True),
    ([acl("prefix:foo", Op.READ)], Op.READ, "fo", False),
    ([acl("prefix:foo", Op.READ)], Op.READ, "barfoo", False),
    # The wildcard resource '*' covers every name (AclAuthorizerTest.testWildCardAcls).
    ([acl("*", Op.READ)], Op.READ, "anything", True),
    # A prefixed '*' is a literal prefix, not a wildcard.
    ([acl("prefix:*", Op.READ)], Op.READ, "anything", False),
    # Deny wins (StandardAuthorizerTest.testDenyPrecedenceWithOperationAll,
    # AclAuthorizerTest.testDenyTakesPrecedence).
    ([acl("foo", Op.READ), acl("foo", Op.READ, "DENY")], Op.READ, "foo", False),
    ([acl("*", Op.ALL), acl("prefix:fo", Op.ALL, "DENY")], Op.WRITE, "foo", False),
    ([acl("prefix:f", Op.ALL), acl("foo", Op.READ, "DENY")], Op.READ, "foo", False),
    ([acl("prefix:f", Op.ALL), acl("foo", Op.READ, "DENY")], Op.WRITE, "foo", True),
    ([acl("prefix:f", Op.ALL), acl("foo", Op.READ, "DENY")], Op.READ, "fox", True),
    # ALL allows every operation (AclAuthorizerTest.testAllowAllAccess).
    ([acl("foo", Op.ALL)], Op.ALTER_CONFIGS, "foo", True),
    # Implied operations (StandardAuthorizerTest.testAuthorizationWithImpliedOperations,
    # AclAuthorizerTest.testAclInheritance): READ/WRITE/DELETE/ALTER imply DESCRIBE,
    # ALTER_CONFIGS implies DESCRIBE_CONFIGS...
    ([acl("foo", Op.READ)], Op.DESCRIBE, "foo", True),
    ([acl("foo", Op.WRITE)], Op.DESCRIBE, "foo", True),
    ([acl("foo", Op.DELETE)], Op.DESCRIBE, "foo", True),
    ([acl("foo", Op.ALTER)], Op.DESCRIBE, "foo", True),
    ([acl("foo", Op.CREATE)], Op.DESCRIBE, "foo", False),
    ([acl("foo", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, "foo", True),
    ([acl("foo", Op.DESCRIBE)], Op.READ, "foo", False),
    ([acl("foo", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS, "foo", False),
    # ... for ALLOW only: denying READ does not deny DESCRIBE, denying ALL does.
    ([acl("foo", Op.ALL), acl("foo", Op.READ, "DENY")], Op.DESCRIBE, "foo", True),
    ([acl("foo", Op.DESCRIBE), acl("foo", Op.ALL, "DENY")], Op.DESCRIBE, "foo", False),
    # Principals: another user's ACL does not apply; User:* applies to everyone
    # (AclAuthorizerTest.testAllowAccessWithCustomPrincipal / WildcardPrincipal).
    ([acl("foo", Op.READ, principal="User:bob")], Op.READ, "foo", False),
    ([acl("foo", Op.READ, principal="User:*")], Op.READ, "foo", True),
    ([acl("foo", Op.READ, principal="User:*"), acl("foo", Op.READ, "DENY")], Op.READ, "foo", False),
    # Hosts: an ACL for another host does not apply; '*' is every host
    # (AclAuthorizerTest.testAuthorizeWithEmptyResourceName/host cases, testHostAddressAcl).
    ([acl("foo", Op.READ, host="10.0.0.1")], Op.READ, "foo", False),
    ([acl("foo", Op.READ, host=HOST)], Op.READ, "foo", True),
    ([acl("foo", Op.READ), acl("foo", Op.READ, "DENY", host=HOST)], Op.READ, "foo", False),
    ([acl("foo", Op.READ), acl("foo", Op.READ, "DENY", host="10.0.0.1")], Op.READ, "foo", True),
    # No ACL at all: denied by default (allow.everyone.if.no.acl.found=false).
    ([], Op.READ, "foo", False),
]


@pytest.mark.parametrize(("acls", "operation", "resource", "expected"), CASES)
def test_decision_table(acls, operation, resource, expected) -> None:
    check(acls, operation, resource, expected)


def test_resource_types_do_not_mix() -> None:
    check([acl("foo", Op.READ, resource_type=T.GROUP)], Op.READ, "foo", False)
    check([acl("foo", Op.READ, resource_type=T.GROUP)], Op.READ, "foo", True, resource_type=T.GROUP)


def test_super_users_are_allowed_everything_even_when_denied() -> None:
    # StandardAuthorizerTest.testSuperUsers (super.users=User:superman;User:alice).
    settings = AuthorizerSettings.from_config("User:superman; User:alice")
    assert settings.super_users == {"User:superman", "User:alice"}
    denied = [acl("foo", Op.ALL, "DENY")]
    check(denied, Op.WRITE, "foo", True, settings=settings)
    check(denied, Op.WRITE, "foo", False, principal=BOB, settings=settings)
    # A super user type must match: Group:alice is not User:alice.
    check([], Op.READ, "foo", False, principal=KafkaPrincipal("Group", "alice"), settings=settings)


def test_allow_everyone_if_no_acl_found_only_where_no_acl_covers_the_resource() -> None:
    # AclAuthorizerTest.testAllowEveryoneIfNoAclFound / StandardAuthorizerTest.testNoAclRule.
    settings = AuthorizerSettings(allow_everyone_if_no_acl_found=True)
    check([], Op.WRITE, "foo", True, settings=settings)
    # Bob's ACL covers foo: alice, with no ACL of her own, is now denied.
    bobs = [acl("foo", Op.READ, principal="User:bob")]
    check(bobs, Op.WRITE, "foo", False, settings=settings)
    check(bobs, Op.WRITE, "bar", True, settings=settings)
    check(
        [acl("prefix:fo", Op.READ, principal="User:bob")], Op.WRITE, "foo", False, settings=settings
    )


def test_authorized_operations_kip_430() -> None:
    authorizer = Authorizer.of(
        [acl("foo", Op.WRITE), acl("foo", Op.ALTER_CONFIGS)], AuthorizerSettings()
    )
    operations = authorizer.authorized_operations(ALICE, HOST, T.TOPIC, "foo")
    assert operations == {Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS}
    assert operations_bitfield(operations) == (1 << 4) | (1 << 8) | (1 << 11) | (1 << 10)
    assert authorizer.authorized_operations(BOB, HOST, T.TOPIC, "foo") == frozenset()
    # Only the type's supported operations are reported (a group has READ, DESCRIBE, DELETE).
    groups = Authorizer.of([acl("g", Op.ALL, resource_type=T.GROUP)], AuthorizerSettings())
    assert groups.authorized_operations(ALICE, HOST, T.GROUP, "g") == {
        Op.READ,
        Op.DESCRIBE,
        Op.DELETE,
    }


@pytest.mark.parametrize(
    ("acls", "expected"),
    [
        # Kafka's AuthorizerTest / StandardAuthorizerTest.testAuthorizeByResourceType cases.
        ([], False),
        ([acl("tx", Op.WRITE, resource_type=T.TRANSACTIONAL_ID)], True),
        ([acl("prefix:t", Op.WRITE, resource_type=T.TRANSACTIONAL_ID)], True),
        (
            [
                acl("prefix:t", Op.WRITE, resource_type=T.TRANSACTIONAL_ID),
                acl("*", Op.WRITE, "DENY", resource_type=T.TRANSACTIONAL_ID),
            ],
            False,
        ),
        (
            [
                acl("tx", Op.WRITE, resource_type=T.TRANSACTIONAL_ID),
                acl("tx", Op.WRITE, "DENY", resource_type=T.TRANSACTIONAL_ID),
            ],
            False,
        ),
        (
            [
                acl("prefix:tx1", Op.WRITE, resource_type=T.TRANSACTIONAL_ID),
                acl("prefix:tx", Op.WRITE, "DENY", resource_type=T.TRANSACTIONAL_ID),
            ],
            False,
        ),
        (
            [
                acl("prefix:tx", Op.WRITE, resource_type=T.TRANSACTIONAL_ID),
                acl("prefix:tx1", Op.WRITE, "DENY", resource_type=T.TRANSACTIONAL_ID),
            ],
            True,
        ),
        ([acl("tx", Op.WRITE, resource_type=T.TOPIC)], False),
    ],
)
def test_authorize_by_resource_type(acls, expected) -> None:
    authorizer = Authorizer.of(acls, AuthorizerSettings())
    got = authorizer.authorize_by_resource_type(ALICE, HOST, Op.WRITE, T.TRANSACTIONAL_ID)
    assert got is expected
