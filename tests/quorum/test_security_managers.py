"""CreateAcls / DescribeAcls / DeleteAcls and Alter/DescribeUserScramCredentials on the controller
(Kafka's ``AclControlManagerTest`` and ``ScramControlManagerTest`` behaviours, cited per test)."""

from __future__ import annotations

import random

import attrs

from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import (
    ScramMechanism,
    credential_from_password,
    salted_password,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import UserScramCredentialRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import QuorumController
from pykraft.quorum.managers.acls import describe_acls
from pykraft.quorum.managers.scram import describe_user_scram_credentials
from tests.quorum.helpers import apply

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
READ_FOO = AclBinding(
    resource_type=ResourceType.TOPIC,
    resource_name="foo",
    pattern_type=PatternType.LITERAL,
    principal="User:alice",
    host="*",
    operation=AclOperation.READ,
    permission_type=AclPermissionType.ALLOW,
)
WRITE_PREFIX = attrs.evolve(
    READ_FOO, pattern_type=PatternType.PREFIXED, resource_name="fo", operation=AclOperation.WRITE
)
GROUP_BOB = attrs.evolve(
    READ_FOO, resource_type=ResourceType.GROUP, resource_name="g", principal="User:bob"
)


def controller() -> QuorumController:
    return QuorumController(rng=random.Random(7), now_ms=0)


def with_acls(*acls: AclBinding) -> MetadataImage:
    result = controller().create_acls(MetadataImage.EMPTY, CreateAclsRequest(acls), 0)
    assert all(error.is_success() for error in result.response.results)
    return apply(MetadataImage.EMPTY, result.records)


def test_create_writes_one_record_per_new_acl_with_distinct_ids() -> None:
    image = with_acls(READ_FOO, WRITE_PREFIX, GROUP_BOB)
    assert sorted(image.acls.acls.values(), key=str) == sorted(
        [READ_FOO, WRITE_PREFIX, GROUP_BOB], key=str
    )
    assert len(set(image.acls.acls)) == 3


def test_an_existing_or_repeated_acl_succeeds_without_a_duplicate() -> None:
    # AclControlManagerTest.testCreateDedupe: creating an ACL already present writes nothing.
    image = with_acls(READ_FOO)
    result = controller().create_acls(
        image, CreateAclsRequest((READ_FOO, WRITE_PREFIX, WRITE_PREFIX)), 0
    )
    assert [e.error for e in result.response.results] == [Errors.NONE] * 3
    assert len(result.records) == 1
    assert len(apply(image, result.records).acls.acls) == 2


def test_invalid_acls_are_refused_with_invalid_request_and_the_rest_created() -> None:
    # AclControlManagerTest.testValidateNewAcl.
    bad = attrs.evolve(READ_FOO, pattern_type=PatternType.MATCH)
    unparsable = attrs.evolve(READ_FOO, principal="alice")
    result = controller().create_acls(
        MetadataImage.EMPTY, CreateAclsRequest((bad, READ_FOO, unparsable)), 0
    )
    errors = result.response.results
    assert [e.error for e in errors] == [
        Errors.INVALID_REQUEST,
        Errors.NONE,
        Errors.INVALID_REQUEST,
    ]
    assert errors[0].message == "Invalid patternType MATCH"
    assert errors[2].message == (
        "Could not parse principal from `alice` (no colon is present separating the principal "
        "type from the principal name)"
    )
    assert len(result.records) == 1


def test_describe_by_filter() -> None:
    image = with_acls(READ_FOO, WRITE_PREFIX, GROUP_BOB)
    everything = describe_acls(image, DescribeAclsRequest(AclBindingFilter()))
    assert set(everything.acls) == {READ_FOO, WRITE_PREFIX, GROUP_BOB}
    matching = AclBindingFilter(
        resource_type=ResourceType.TOPIC, resource_name="foo", pattern_type=PatternType.MATCH
    )
    assert set(describe_acls(image, DescribeAclsRequest(matching)).acls) == {
        READ_FOO,
        WRITE_PREFIX,
    }
    bob = describe_acls(image, DescribeAclsRequest(AclBindingFilter(principal="User:bob")))
    assert bob.acls == (GROUP_BOB,)
    refused = describe_acls(
        image, DescribeAclsRequest(AclBindingFilter(pattern_type=PatternType.UNKNOWN))
    )
    assert refused.error.error is Errors.INVALID_REQUEST and not refused.acls


def test_delete_by_filters_reports_per_filter_and_removes_once() -> None:
    # AclControlManager.deleteAclsForFilter: each filter reports what it matches; the records
    # are a set, so an ACL two filters match is removed once.
    image = with_acls(READ_FOO, WRITE_PREFIX, GROUP_BOB)
    request = DeleteAclsRequest(
        (
            AclBindingFilter(resource_type=ResourceType.TOPIC),
            AclBindingFilter(principal="User:alice"),
            AclBindingFilter(operation=AclOperation.UNKNOWN),
        )
    )
    result = controller().delete_acls(image, request, 0)
    first, second, bad = result.response.results
    assert set(first.matching_acls) == {READ_FOO, WRITE_PREFIX} and first.error.is_success()
    assert set(second.matching_acls) == {READ_FOO, WRITE_PREFIX} and second.error.is_success()
    assert len(result.records) == 2
    assert bad.error.error is Errors.INVALID_REQUEST
    assert bad.error.message == "Unknown entryFilter."
    after = apply(image, result.records)
    assert list(after.acls.acls.values()) == [GROUP_BOB]


def test_delete_matching_nothing_writes_nothing() -> None:
    result = controller().delete_acls(
        with_acls(READ_FOO), DeleteAclsRequest((AclBindingFilter(principal="User:zed"),)), 0
    )
    assert result.records == () and result.response.results[0].matching_acls == ()


def upsert(
    user: str, mechanism: ScramMechanism = SHA256, iterations: int = 4096, password: str = "pw"
):
    salt = (b"salt-" + user.encode()).ljust(16, b".")
    return ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=salted_password(mechanism, password, salt, iterations)
        if mechanism is not ScramMechanism.UNKNOWN
        else b"x",
    )


def alter(image: MetadataImage, *alterations):
    request = AlterUserScramCredentialsRequest(
        deletions=tuple(a for a in alterations if isinstance(a, ScramCredentialDeletion)),
        upsertions=tuple(a for a in alterations if isinstance(a, ScramCredentialUpsertion)),
    )
    result = controller().alter_user_scram_credentials(image, request, 0)
    errors = {r.user: (r.error.error, r.error.message) for r in result.response.results}
    return apply(image, result.records), errors, result.records


def test_upsertion_stores_only_the_derived_keys() -> None:
    image, errors, records = alter(MetadataImage.EMPTY, upsert("alice", SHA512, 8192, "secret"))
    assert errors == {"alice": (Errors.NONE, None)}
    (record,) = records
    assert isinstance(record, UserScramCredentialRecord)
    expected = credential_from_password(SHA512, "secret", b"salt-alice......", 8192)
    assert image.scram.credential("alice", SHA512) == expected
    salted = salted_password(SHA512, "secret", b"salt-alice......", 8192)
    assert salted not in (record.salt, record.stored_key, record.server_key)
    assert "secret" not in repr(record) and salted.hex() not in repr(upsert("alice"))


def test_kafkas_checks_each_fail_only_their_user() -> None:
    # ScramControlManagerTest / KafkaApis AlterUserScramCredentials checks.
    image, errors, _ = alter(
        MetadataImage.EMPTY,
        upsert("few", iterations=4095),
        upsert("many", iterations=16385),
        upsert("unknown", ScramMechanism.UNKNOWN),
        upsert(""),
        upsert("twice", SHA256),
        upsert("twice", SHA512),
        ScramCredentialDeletion("missing", SHA256),
        upsert("ok", iterations=16384),
    )
    assert errors == {
        "few": (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "unknown": (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "twice": (
            Errors.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        "missing": (
            Errors.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "ok": (Errors.NONE, None),
    }
    assert list(image.scram.users) == ["ok"]


def test_one_alteration_per_user_per_request() -> None:
    # ScramControlManager.alterCredentials keys the request by user: a second alteration of a
    # user, even for another mechanism, fails the user and drops the first.
    image, _, _ = alter(MetadataImage.EMPTY, upsert("alice"))
    image, errors, records = alter(
        image,
        ScramCredentialDeletion("alice", SHA256),
        upsert("alice", SHA512),
        upsert("bob", SHA256),
        upsert("bob", SHA512),
    )
    duplicate = (
        Errors.DUPLICATE_RESOURCE,
        "A user credential cannot be altered twice in the same request",
    )
    assert errors == {"alice": duplicate, "bob": duplicate} and records == ()
    assert image.scram.credential("alice", SHA256) is not None


def test_a_users_first_failure_is_its_answer() -> None:
    _, errors, records = alter(
        MetadataImage.EMPTY, upsert("alice", iterations=1), upsert("alice", SHA512)
    )
    assert errors == {"alice": (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")}
    assert records == ()


def test_delete_and_describe() -> None:
    image, _, _ = alter(MetadataImage.EMPTY, upsert("alice"), upsert("bob", SHA512, 8192))
    image, _, _ = alter(image, upsert("alice", SHA512, 5000))
    described = describe_user_scram_credentials(image, DescribeUserScramCredentialsRequest())
    assert [
        (r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in described.results
    ] == [
        ("alice", [(SHA256, 4096), (SHA512, 5000)]),
        ("bob", [(SHA512, 8192)]),
    ]
    image, errors, _ = alter(image, ScramCredentialDeletion("alice", SHA256))
    assert errors == {"alice": (Errors.NONE, None)}
    some = describe_user_scram_credentials(
        image, DescribeUserScramCredentialsRequest(("alice", "zed", "bob", "bob"))
    )
    assert [(r.user, r.error.error) for r in some.results] == [
        ("alice", Errors.NONE),
        ("zed", Errors.RESOURCE_NOT_FOUND),
        ("bob", Errors.DUPLICATE_RESOURCE),
    ]
    assert some.results[0].credential_infos[0].mechanism is SHA512
