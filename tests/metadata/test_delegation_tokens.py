"""Delegation tokens in the metadata log: records, both codecs, image/delta replay, snapshots.

Mirrors Kafka's ``DelegationTokenImageTest`` / ``DelegationTokenDeltaTest`` (replay, removal,
the image rebuilt from its own records) and the record schemas ``DelegationTokenRecord.json``
(apiKey 10) and ``RemoveDelegationTokenRecord.json`` (apiKey 26).
"""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from pykraft.metadata.codec import MetadataCodecError, decode_record, encode_record
from pykraft.metadata.compact_codec import decode_records, encode_records
from pykraft.metadata.delegation_tokens import TokenInformation, token_hmac
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord
from pykraft.metadata.snapshot import decode_snapshot, encode_snapshot, snapshot_to_image

TOKEN = DelegationTokenRecord(
    owner="User:alice",
    requester="User:bob",
    renewers=("User:carol", "User:dan"),
    issue_timestamp=1_000,
    max_timestamp=1_000 + 7 * 24 * 3600_000,
    expiration_timestamp=1_000 + 24 * 3600_000,
    token_id="tok-1",
)


def replayed(*records: DelegationTokenRecord | RemoveDelegationTokenRecord) -> MetadataImage:
    delta = MetadataDelta(MetadataImage.EMPTY)
    for record in records:
        delta.replay(record)
    return delta.apply(offset=len(records) - 1, epoch=1)


def test_type_ids_are_kafkas() -> None:
    assert DelegationTokenRecord.TYPE_ID == 10
    assert RemoveDelegationTokenRecord.TYPE_ID == 26


def test_json_line_round_trip_keeps_kafkas_field_names() -> None:
    line = encode_record(TOKEN)
    assert '"renewers":["User:carol","User:dan"]' in line
    assert '"expirationTimestamp":86401000' in line
    assert decode_record(line) == TOKEN


def test_compact_round_trip() -> None:
    records = (TOKEN, RemoveDelegationTokenRecord(token_id="tok-1"))
    assert decode_records(encode_records(records), 2) == records


def test_renewers_may_be_empty() -> None:
    record = DelegationTokenRecord(
        owner="User:a",
        requester="User:a",
        renewers=(),
        issue_timestamp=0,
        max_timestamp=0,
        expiration_timestamp=0,
        token_id="t",
    )
    assert decode_record(encode_record(record)) == record


@pytest.mark.parametrize(
    "renewers", [["User:a", 5], "User:a", [None]], ids=["int", "not-a-list", "null"]
)
def test_bad_renewers_are_refused(renewers: object) -> None:
    line = encode_record(TOKEN).replace('["User:carol","User:dan"]', json.dumps(renewers))
    with pytest.raises(MetadataCodecError, match="renewers"):
        decode_record(line)


def test_replay_puts_the_token_under_its_id() -> None:
    image = replayed(TOKEN)
    token = image.delegation_tokens.tokens["tok-1"]
    assert token == TokenInformation.from_record(TOKEN)
    assert token.expiry_timestamp_ms == TOKEN.expiration_timestamp
    assert token.max_timestamp_ms == TOKEN.max_timestamp


def test_a_later_record_replaces_the_token() -> None:
    renewed = DelegationTokenRecord(
        owner=TOKEN.owner,
        requester=TOKEN.requester,
        renewers=TOKEN.renewers,
        issue_timestamp=TOKEN.issue_timestamp,
        max_timestamp=TOKEN.max_timestamp,
        expiration_timestamp=TOKEN.expiration_timestamp + 5,
        token_id=TOKEN.token_id,
    )
    image = replayed(TOKEN, renewed)
    assert image.delegation_tokens.tokens["tok-1"].expiry_timestamp_ms == (
        TOKEN.expiration_timestamp + 5
    )


def test_remove_drops_the_token() -> None:
    image = replayed(TOKEN, RemoveDelegationTokenRecord(token_id="tok-1"))
    assert "tok-1" not in image.delegation_tokens.tokens


def test_removing_an_unknown_token_is_a_replay_error_and_changes_nothing() -> None:
    delta = MetadataDelta(replayed(TOKEN))
    with pytest.raises(MetadataReplayError, match="no delegation token"):
        delta.replay(RemoveDelegationTokenRecord(token_id="other"))
    assert "tok-1" in delta.apply().delegation_tokens.tokens


def test_removing_twice_in_one_delta_is_refused() -> None:
    delta = MetadataDelta(replayed(TOKEN))
    delta.replay(RemoveDelegationTokenRecord(token_id="tok-1"))
    with pytest.raises(MetadataReplayError):
        delta.replay(RemoveDelegationTokenRecord(token_id="tok-1"))


def test_an_untouched_image_is_shared() -> None:
    image = replayed(TOKEN)
    assert MetadataDelta(image).apply().delegation_tokens is image.delegation_tokens


def test_snapshot_rebuilds_the_tokens() -> None:
    other = DelegationTokenRecord(
        owner="User:zed",
        requester="User:zed",
        renewers=(),
        issue_timestamp=5,
        max_timestamp=50,
        expiration_timestamp=20,
        token_id="a-first",
    )
    image = replayed(TOKEN, other)
    header, records = decode_snapshot(encode_snapshot(image, created_ms=0), "test")
    token_records = [r for r in records if isinstance(r, DelegationTokenRecord)]
    assert [r.token_id for r in token_records] == ["a-first", "tok-1"]
    rebuilt = snapshot_to_image(header, records, "test")
    assert rebuilt.delegation_tokens == image.delegation_tokens


def test_owner_or_renewer_includes_the_requester() -> None:
    # KIP-373: the requester acts for the owner; Kafka's TokenInformation.ownerOrRenewer.
    token = TokenInformation.from_record(TOKEN)
    for principal in ("User:alice", "User:bob", "User:carol", "User:dan"):
        assert token.owner_or_renewer(principal)
    assert not token.owner_or_renewer("User:eve")


def test_token_hmac_is_hmac_sha512_of_the_id() -> None:
    # RFC 4231 test case 2 (key "Jefe").
    assert token_hmac("what do ya want for nothing?", "Jefe").hex() == (
        "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
        "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
    )
    expected = hmac.new(b"secret", b"tok-1", hashlib.sha512).digest()
    assert token_hmac("tok-1", "secret") == expected
    assert token_hmac("tok-1", "other") != expected
