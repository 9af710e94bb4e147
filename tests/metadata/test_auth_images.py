"""ACL and SCRAM records, images and deltas (Kafka's AclsDelta / ScramDelta, KIP-554, KIP-801)."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclError,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    validate_filter,
    validate_new_acl,
)
from pykraft.metadata.auth.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    credential_from_salted_password,
    salted_password,
)
from pykraft.metadata.codec import MetadataCodecError, decode_record, encode_record
from pykraft.metadata.compact_codec import decode_records, encode_records
from pykraft.metadata.delta import MetadataDelta, apply_records
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)
from pykraft.metadata.snapshot import image_to_records

ACL_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
SHA512 = ScramMechanism.SCRAM_SHA_512
READ_FOO = AclBinding(
    resource_type=ResourceType.TOPIC,
    resource_name="foo",
    pattern_type=PatternType.PREFIXED,
    principal="User:alice",
    host="*",
    operation=AclOperation.READ,
    permission_type=AclPermissionType.ALLOW,
)
CREDENTIAL = UserScramCredentialRecord(
    name="alice",
    mechanism=SHA512.value,
    salt=b"\x00salt\xff",
    stored_key=b"stored",
    server_key=b"server",
    iterations=8192,
)


def test_bytes_fields_are_standard_base64_in_json_and_round_trip() -> None:
    line = encode_record(CREDENTIAL)
    obj = json.loads(line)
    assert obj["salt"] == "AHNhbHT/"
    assert obj["storedKey"] == "c3RvcmVk"
    assert decode_record(line) == CREDENTIAL
    assert decode_records(encode_records([CREDENTIAL]), 1) == (CREDENTIAL,)


@pytest.mark.parametrize("salt", ["AHNhbHT", "AHNhbHT/=", "AHNh bHT/", 5])
def test_bad_base64_is_a_codec_error(salt: object) -> None:
    obj = json.loads(encode_record(CREDENTIAL))
    obj["salt"] = salt
    with pytest.raises(MetadataCodecError, match="'salt'"):
        decode_record(json.dumps(obj))


def test_no_secret_appears_in_a_repr() -> None:
    credential = ScramCredential(b"salt-bytes", b"stored-bytes", b"server-bytes", 4096)
    for text in (repr(CREDENTIAL), repr(credential)):
        assert "stored" not in text and "server" not in text.replace("server_key", "")
        assert "salt-bytes" not in text


def test_the_controller_derives_the_same_keys_as_scramp_from_the_password() -> None:
    salt = b"0123456789abcdef"
    for mechanism in (ScramMechanism.SCRAM_SHA_256, SHA512):
        salted = salted_password(mechanism, "pencil", salt, 4096)
        assert credential_from_salted_password(
            mechanism, salt, salted, 4096
        ) == credential_from_password(mechanism, "pencil", salt, 4096)
    assert ScramMechanism.from_mechanism_name("SCRAM-SHA-512") is SHA512
    assert ScramMechanism.from_mechanism_name("PLAIN") is ScramMechanism.UNKNOWN


def test_acls_replay_add_remove_and_share_the_rest() -> None:
    base = apply_records(MetadataImage.EMPTY, [TopicRecord(name="t", topic_id=ACL_ID)], offset=0)
    image = apply_records(base, [READ_FOO.to_record(ACL_ID)], offset=1)
    assert dict(image.acls.acls) == {ACL_ID: READ_FOO}
    assert image.topics is base.topics
    removed = apply_records(image, [RemoveAccessControlEntryRecord(id=ACL_ID)], offset=2)
    assert not removed.acls.acls
    assert removed.scram is image.scram


def test_removing_an_unknown_acl_or_credential_is_refused_and_changes_nothing() -> None:
    delta = MetadataDelta(MetadataImage.EMPTY)
    with pytest.raises(MetadataReplayError, match="Failed to find existing acl"):
        delta.replay(RemoveAccessControlEntryRecord(id=ACL_ID))
    with pytest.raises(MetadataReplayError, match="no SCRAM-SHA-512 credential"):
        delta.replay(RemoveUserScramCredentialRecord(name="alice", mechanism=2))
    assert delta.apply() == MetadataImage.EMPTY


def test_scram_credentials_by_user_and_mechanism() -> None:
    image = apply_records(MetadataImage.EMPTY, [CREDENTIAL], offset=0)
    credential = image.scram.credential("alice", SHA512)
    assert credential is not None and credential.iterations == 8192
    assert image.scram.credential("alice", ScramMechanism.SCRAM_SHA_256) is None
    assert image.scram.credential("bob", SHA512) is None
    image = apply_records(image, [RemoveUserScramCredentialRecord(name="alice", mechanism=2)])
    assert "alice" not in image.scram.users


def test_a_snapshot_rebuilds_acls_and_credentials() -> None:
    image = apply_records(MetadataImage.EMPTY, [READ_FOO.to_record(ACL_ID), CREDENTIAL], offset=1)
    assert apply_records(MetadataImage.EMPTY, image_to_records(image), offset=1) == image


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"resource_type": ResourceType.ANY}, "Invalid resourceType ANY"),
        ({"pattern_type": PatternType.MATCH}, "Invalid patternType MATCH"),
        ({"operation": AclOperation.ANY}, "Invalid operation ANY"),
        ({"permission_type": AclPermissionType.ANY}, "Invalid permissionType ANY"),
        ({"resource_name": ""}, "Resource name should not be empty"),
        ({"principal": "alice"}, "Could not parse principal"),
        ({"resource_type": ResourceType.CLUSTER}, "only valid name for the CLUSTER"),
    ],
)
def test_invalid_new_acls_have_kafkas_messages(change: dict[str, Any], message: str) -> None:

    with pytest.raises(AclError, match=message):
        validate_new_acl(attrs.evolve(READ_FOO, **change))


def test_filters_match_as_kafkas_resource_pattern_filter() -> None:
    # ResourcePatternFilterTest: MATCH finds the prefixed ACL covering the name; LITERAL does not.
    assert AclBindingFilter(resource_name="foobar", pattern_type=PatternType.MATCH).matches(
        READ_FOO
    )
    assert not AclBindingFilter(resource_name="foobar", pattern_type=PatternType.LITERAL).matches(
        READ_FOO
    )
    assert not AclBindingFilter(resource_name="foobar").matches(READ_FOO)
    assert AclBindingFilter(resource_name="foo").matches(READ_FOO)
    assert AclBindingFilter(principal="User:alice", operation=AclOperation.READ).matches(READ_FOO)
    assert not AclBindingFilter(principal="User:bob").matches(READ_FOO)
    with pytest.raises(AclError, match="Unknown patternFilter"):
        validate_filter(AclBindingFilter(pattern_type=PatternType.UNKNOWN))
    with pytest.raises(AclError, match="Unknown entryFilter"):
        validate_filter(AclBindingFilter(operation=AclOperation.UNKNOWN))
