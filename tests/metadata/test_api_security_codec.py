"""The ACL and SCRAM parts of the controller's HTTP contract: every body round-trips, and a
body the contract refuses is one JsonBodyError sentence (never a KeyError)."""

from __future__ import annotations

import attrs
import pytest

from pykraft.metadata.api import security
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import ScramMechanism
from pykraft.protocol.errors import Errors

ACL = AclBinding(
    resource_type=ResourceType.TRANSACTIONAL_ID,
    resource_name="tx-",
    pattern_type=PatternType.PREFIXED,
    principal="User:alice",
    host="10.0.0.1",
    operation=AclOperation.IDEMPOTENT_WRITE,
    permission_type=AclPermissionType.DENY,
)
UPSERT = security.ScramCredentialUpsertion(
    name="alice",
    mechanism=ScramMechanism.SCRAM_SHA_256,
    iterations=4096,
    salt=b"\x00\x01salt",
    salted_password=b"\xffsalted-secret",
)


def test_acl_requests_and_answers_round_trip() -> None:
    create = security.CreateAclsRequest((ACL,))
    assert (
        security.create_acls_request_from_json(Fields(security.create_acls_request_to_json(create)))
        == create
    )
    acl_filter = AclBindingFilter(principal="User:alice", operation=AclOperation.READ)
    delete = security.DeleteAclsRequest((acl_filter, AclBindingFilter()))
    assert (
        security.delete_acls_request_from_json(Fields(security.delete_acls_request_to_json(delete)))
        == delete
    )
    assert security.acl_filter_from_values(security.acl_filter_to_query(acl_filter)) == acl_filter
    deleted = security.DeleteAclsResponse(
        (
            security.DeleteAclsFilterResult(SUCCESS, (ACL,)),
            security.DeleteAclsFilterResult(
                ApiError(Errors.INVALID_REQUEST, "Unknown entryFilter.")
            ),
        )
    )
    assert (
        security.delete_acls_response_from_json(
            Fields(security.delete_acls_response_to_json(deleted))
        )
        == deleted
    )


def test_scram_requests_and_answers_round_trip_and_hide_the_salted_password() -> None:
    alter = security.AlterUserScramCredentialsRequest(
        deletions=(security.ScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512),),
        upsertions=(UPSERT,),
    )
    body = security.alter_scram_request_to_json(alter)
    assert body["upsertions"][0]["mechanism"] == "SCRAM-SHA-256"
    assert security.alter_scram_request_from_json(Fields(body)) == alter
    assert "secret" not in repr(alter) and "salt'" not in repr(alter)
    described = security.DescribeUserScramCredentialsResponse(
        results=(
            security.DescribeUserScramCredentialsResult(
                "alice",
                SUCCESS,
                (security.CredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),),
            ),
        )
    )
    assert (
        security.describe_scram_response_from_json(
            Fields(security.describe_scram_response_to_json(described))
        )
        == described
    )


def test_an_unknown_mechanism_reads_as_unknown_for_the_controller_to_refuse() -> None:
    body = security.alter_scram_request_to_json(
        security.AlterUserScramCredentialsRequest(upsertions=(UPSERT,))
    )
    body["upsertions"][0]["mechanism"] = "SCRAM-SHA-1"
    (upsertion,) = security.alter_scram_request_from_json(Fields(body)).upsertions
    assert upsertion.mechanism is ScramMechanism.UNKNOWN


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"salt": "not base64!"}, "'salt' must be standard base64"),
        ({"iterations": "4096"}, "'iterations'"),
        ({"name": None}, "'name'"),
    ],
)
def test_bad_upsertions_are_a_sentence(change: dict[str, object], message: str) -> None:
    body = security.alter_scram_request_to_json(
        security.AlterUserScramCredentialsRequest(upsertions=(UPSERT,))
    )
    body["upsertions"][0].update(change)
    with pytest.raises(JsonBodyError, match=message):
        security.alter_scram_request_from_json(Fields(body))


def test_bad_acls_and_too_many_are_a_sentence() -> None:
    body = {"creations": [dict(security.acl_to_json(ACL), operation="READS")]}
    with pytest.raises(JsonBodyError, match="'operation' must be one of"):
        security.create_acls_request_from_json(Fields(body))
    many = {"creations": [security.acl_to_json(ACL)] * (security.MAX_ACL_CREATIONS + 1)}
    with pytest.raises(JsonBodyError, match="At most 1000 creations"):
        security.create_acls_request_from_json(Fields(many))
    # Names are read in any case; host and pattern type default as in kafka-acls.
    loose = {
        k: v for k, v in security.acl_to_json(ACL).items() if k not in ("host", "pattern_type")
    }
    loose["operation"] = "idempotent_write"
    (read,) = security.create_acls_request_from_json(Fields({"creations": [loose]})).creations
    assert read == attrs.evolve(ACL, host="*", pattern_type=PatternType.LITERAL)
