"""The metadata export never shows a SCRAM secret (export/metadata_rows.py): a
``UserScramCredentialRecord`` row keeps user, mechanism and iterations; salt, StoredKey and
ServerKey are empty, as Kafka's metadata shell redacts them (``ScramCredentialDataNode``)."""

from __future__ import annotations

from pykraft.export.metadata_rows import (
    RECORD_COLUMNS,
    REDACTED_BYTES,
    SOURCE_LOG,
    RecordPosition,
    record_fields,
    record_row,
)
from pykraft.metadata.auth.scram import ScramMechanism, credential_from_password
from pykraft.metadata.records import UserScramCredentialRecord

SALT = b"0123456789abcdef"


def scram_record() -> UserScramCredentialRecord:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_512, "alice-secret", SALT, 8192)
    return credential.to_record("alice", ScramMechanism.SCRAM_SHA_512)


def test_scram_secrets_are_redacted_and_the_rest_kept() -> None:
    record = scram_record()
    assert record.stored_key and record.server_key  # something real to hide
    assert record_fields(record) == (
        "alice",
        ScramMechanism.SCRAM_SHA_512.value,
        REDACTED_BYTES,
        REDACTED_BYTES,
        REDACTED_BYTES,
        8192,
    )


def test_no_byte_of_a_secret_reaches_a_records_row() -> None:
    record = scram_record()
    position = RecordPosition(SOURCE_LOG, None, 8, 7, 1, 1_700_000_000_000, 0)
    row = record_row(record, position)
    assert len(row) == len(RECORD_COLUMNS)
    struct = row[RECORD_COLUMNS.index("user_scram_credential")]
    assert struct == record_fields(record)
    flat = repr(row).encode()
    for secret in (record.salt, record.stored_key, record.server_key):
        assert secret not in flat and repr(secret).encode() not in flat
