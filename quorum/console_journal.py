"""The web console's journal page (issue 16): the newest metadata records of the retained
window as rows, pure (``quorum/service_console.py`` reads the window, ``console_html`` renders).

What a caller sees (the page needs DESCRIBE_CONFIGS on the cluster, as Kafka's DescribeConfigs
of a broker and DescribeClientQuotas do, since config and quota records are most of what is
left): SCRAM salts and keys and delegation token ids, owners and renewers are redacted; a
ConfigRecord's value is redacted when DescribeConfigs would hide it (``sensitive_config``); a
record about a topic the caller may not DESCRIBE is skipped and counted.

The walk starts at the newest batch and stops at the rows shown: a load parses about as many
records as it shows (plus the NoOpRecords it skips), not the whole scanned window.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import attrs

from pykraft.metadata.broker_config_defs import BROKER_CONFIGS
from pykraft.metadata.config_defs import TOPIC_CONFIGS

JOURNAL_RECORDS = 200
# The journal reads at most this many records back to find JOURNAL_RECORDS it shows: the
# active controller appends a NoOpRecord every 500 ms (Kafka's metadata.max.idle.interval.ms),
# which the journal hides unless asked.
JOURNAL_SCAN_RECORDS = 5000
NO_OP_RECORD = "NoOpRecord"
# Fields of metadata records the console never shows: SCRAM's salt and keys (what a password
# check needs), a delegation token's id (half of what a client authenticates with).
REDACTED_FIELDS = frozenset({"salt", "storedKey", "serverKey", "tokenId"})
# A delegation token's owner, requester and renewers: Kafka's DescribeDelegationToken shows a
# token only to its owner and renewers (or DESCRIBE on the token), which the journal cannot ask.
TOKEN_RECORD_FIELDS = frozenset({"owner", "requester", "renewers"})
REDACTED = "(redacted)"
# ConfigRecord.resourceType values (metadata.records.ConfigResourceType).
CONFIG_TOPIC, CONFIG_BROKER = 2, 4
LISTENER_PREFIX = "listener.name."


@attrs.frozen
class JournalRow:
    offset: int
    epoch: int
    append_time_ms: int
    record_type: str
    fields: str  # the record's other fields as JSON, secrets redacted


def sensitive_config(resource_type: int, name: str) -> bool:
    """Whether a ConfigRecord's value stays hidden, as DescribeConfigs hides it
    (``broker/config_describe.py``, Kafka's ``KafkaConfig.maybeSensitive``: a PASSWORD, or a
    key whose type is unknown): listener-prefixed broker keys (``listener.name.x.ssl.*``, often
    passwords) and any broker or topic key the config definitions do not know."""
    if resource_type == CONFIG_BROKER:
        definition = BROKER_CONFIGS.get(name)
        return name.startswith(LISTENER_PREFIX) or definition is None or definition.sensitive
    if resource_type == CONFIG_TOPIC:
        definition = TOPIC_CONFIGS.get(name)
        return definition is None or definition.sensitive
    return False


def record_topic(record: Mapping[str, object], topic_names: Mapping[str, str]) -> str | None:
    """The topic a metadata record is about ("" when its id is no longer known); None when
    the record is not about a topic."""
    if record.get("type") == "TopicRecord":
        return str(record.get("name", ""))
    if record.get("type") == "ConfigRecord":
        if record.get("resourceType") == CONFIG_TOPIC:
            return str(record.get("resourceName", ""))
        return None
    topic_id = record.get("topicId")
    if isinstance(topic_id, str):
        return topic_names.get(topic_id, "")
    return None


@attrs.frozen
class Journal:
    rows: tuple[JournalRow, ...]
    hidden: int  # topic records the caller may not DESCRIBE, skipped on the way


def journal_rows(
    batches: Sequence[tuple[int, int, int, Sequence[bytes]]],
    limit: int = JOURNAL_RECORDS,
    no_ops: bool = False,
    visible: Callable[[str], bool] | None = None,
    topic_names: Mapping[str, str] | None = None,
) -> Journal:
    """The last ``limit`` records, newest first, of ``batches`` (base offset, epoch, append
    time, the records' JSON lines as ``metadata.codec`` writes them), walked from the newest
    and stopped once ``limit`` are found; secrets and sensitive config values redacted;
    NoOpRecords only with ``no_ops``; records about a topic ``visible`` refuses (by name, from
    ``topic_names`` for a topic id; a topic no longer known counts as refused) skipped."""
    rows: list[JournalRow] = []
    hidden = 0
    names = topic_names or {}
    for base_offset, epoch, append_time_ms, lines in reversed(batches):
        for index in range(len(lines) - 1, -1, -1):
            if len(rows) >= limit:
                return Journal(tuple(rows), hidden)
            record = json.loads(lines[index])
            record_type = str(record.get("type", "?"))
            if record_type == NO_OP_RECORD and not no_ops:
                continue
            if visible is not None:
                topic_name = record_topic(record, names)
                if topic_name is not None and not (topic_name and visible(topic_name)):
                    hidden += 1
                    continue
            rows.append(
                JournalRow(
                    offset=base_offset + index,
                    epoch=epoch,
                    append_time_ms=append_time_ms,
                    record_type=record_type,
                    fields=json.dumps(_redacted(record), separators=(", ", ": ")),
                )
            )
    return Journal(tuple(rows), hidden)


def _redacted(record: dict[str, object]) -> dict[str, object]:
    record_type = record.pop("type", None)
    record.pop("version", None)
    secret = set(REDACTED_FIELDS)
    if record_type == "DelegationTokenRecord":
        secret |= TOKEN_RECORD_FIELDS
    for name in secret.intersection(record):
        record[name] = REDACTED
    if (
        record_type == "ConfigRecord"
        and record.get("value") is not None
        and sensitive_config(int(str(record.get("resourceType", 0))), str(record.get("name")))
    ):
        record["value"] = REDACTED
    return record
