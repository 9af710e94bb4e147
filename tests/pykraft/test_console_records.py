"""``console_records``: Kafka's ``LineMessageReader`` and ``DefaultMessageFormatter``, checked
against the strings of Kafka's ``LineMessageReaderTest`` and ``DefaultMessageFormatterTest``
(tools/src/test/java/org/apache/kafka/tools/...)."""

from __future__ import annotations

import pytest

from pykraft.console_records import (
    NO_TIMESTAMP_TYPE,
    ConsoleRecordError,
    ConsumedRecord,
    LineReader,
    LineRecord,
    MessageFormatter,
)

HEADERS = (("h1", b"v1"), ("h2", b"v2"))


def read(line: str, **properties: str) -> LineRecord:
    return LineReader.of({k.replace("_", "."): v for k, v in properties.items()}).read(line, 1)


@pytest.mark.parametrize(
    ("line", "properties", "expected"),
    [
        ("key0\tvalue0", {}, LineRecord(None, b"key0\tvalue0")),
        ("key0\tvalue0", {"parse_key": "true"}, LineRecord(b"key0", b"value0")),
        (
            "key0:value0",
            {"parse_key": "TRUE ", "key_separator": ":"},
            LineRecord(b"key0", b"value0"),
        ),
        ("key0\tvalue\t0", {"parse_key": "true"}, LineRecord(b"key0", b"value\t0")),
        (
            "headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0",
            {"parse_key": "true", "parse_headers": "true"},
            LineRecord(
                b"key0",
                b"value0",
                (("headerKey0", b"headerValue0"), ("headerKey1", b"headerValue1")),
            ),
        ),
        ("h1:v1,h2:v2\tvalue0", {"parse_headers": "true"}, LineRecord(None, b"value0", HEADERS)),
        (
            "h1=v1;h2=v2|k|v",
            {
                "parse_key": "true",
                "parse_headers": "true",
                "key_separator": "|",
                "headers_delimiter": "|",
                "headers_separator": ";",
                "headers_key_separator": "=",
            },
            LineRecord(b"k", b"v", HEADERS),
        ),
        # ignore.error: no separator -> no key; a header without ':' has a null value.
        ("value0", {"parse_key": "true", "ignore_error": "true"}, LineRecord(None, b"value0")),
        (
            "h1\tv",
            {"parse_headers": "true", "ignore_error": "true"},
            LineRecord(None, b"v", (("h1", None),)),
        ),
        # null.marker: key, value and header values equal to it are null.
        ("<NULL>\t<NULL>", {"parse_key": "true", "null_marker": "<NULL>"}, LineRecord(None, None)),
        (
            "h1:<NULL>\tv",
            {"parse_headers": "true", "null_marker": "<NULL>"},
            LineRecord(None, b"v", (("h1", None),)),
        ),
        (
            "<NULL>\tk\tv",
            {"parse_key": "true", "parse_headers": "true", "null_marker": "<NULL>"},
            LineRecord(b"k", b"v"),
        ),
        ("", {}, LineRecord(None, b"")),
    ],
)
def test_line_reader_reads_a_line_as_kafkas_reader_does(
    line: str, properties: dict[str, str], expected: LineRecord
) -> None:
    assert read(line, **properties) == expected


@pytest.mark.parametrize(
    ("line", "properties", "message"),
    [
        ("value0", {"parse_key": "true"}, "No key separator found on line number 1: 'value0'"),
        (
            "value0",
            {"parse_headers": "true"},
            "No headers delimiter found on line number 1: 'value0'",
        ),
        (
            "h1\tv",
            {"parse_headers": "true"},
            "No header key separator found in pair 'h1' on line number 1",
        ),
        (
            "<N>:v\tvalue",
            {"parse_headers": "true", "null_marker": "<N>"},
            "Header keys should not be equal to the null marker '<N>' as they can't be null",
        ),
    ],
)
def test_line_reader_refuses_a_bad_line_with_kafkas_message(
    line: str, properties: dict[str, str], message: str
) -> None:
    with pytest.raises(ConsoleRecordError) as error:
        read(line, **properties)
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        (
            {"headers.delimiter": ",", "headers.separator": ","},
            "headers.delimiter and headers.separator may not be equal",
        ),
        (
            {"headers.delimiter": ":"},
            "headers.delimiter and headers.key.separator may not be equal",
        ),
        (
            {"headers.separator": ":"},
            "headers.separator and headers.key.separator may not be equal",
        ),
        ({"null.marker": "\t"}, "null.marker and key.separator may not be equal"),
        (
            {"null.marker": ",", "key.separator": "|"},
            "null.marker and headers.separator may not be equal",
        ),
    ],
)
def test_line_reader_refuses_clashing_separators(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConsoleRecordError) as error:
        LineReader.of(properties)
    assert str(error.value) == message


RECORD = ConsumedRecord(
    partition=9, offset=9876, timestamp_type="CreateTime", timestamp=1234,
    key=b"someKey", value=b"someValue", headers=HEADERS,
)  # fmt: skip
ALL = {
    "print.timestamp": "true", "print.partition": "true", "print.offset": "true",
    "print.headers": "true", "print.key": "true", "print.value": "true",
}  # fmt: skip


@pytest.mark.parametrize(
    ("properties", "record", "expected"),
    [
        ({}, RECORD, b"someValue\n"),
        ({"print.key": "true"}, RECORD, b"someKey\tsomeValue\n"),
        (
            ALL,
            RECORD,
            b"CreateTime:1234\tPartition:9\tOffset:9876\th1:v1,h2:v2\tsomeKey\tsomeValue\n",
        ),
        (
            {**ALL, "key.separator": "|", "line.separator": "^", "headers.separator": "#"},
            RECORD,
            b"CreateTime:1234|Partition:9|Offset:9876|h1:v1#h2:v2|someKey|someValue^",
        ),
        # The last field printed ends the line, whichever it is.
        ({"print.key": "true", "print.value": "false"}, RECORD, b"someKey\n"),
        ({"print.partition": "true", "print.value": "false"}, RECORD, b"Partition:9\n"),
        ({"print.value": "false"}, RECORD, b""),
        (
            {**ALL, "null.literal": "NULL"},
            ConsumedRecord(0, 1, "LogAppendTime", 5, None, None, [("h", None)]),
            b"LogAppendTime:5\tPartition:0\tOffset:1\th:NULL\tNULL\tNULL\n",
        ),
        (
            ALL,
            ConsumedRecord(0, 1, NO_TIMESTAMP_TYPE, -1, b"k", b"v"),
            b"NO_TIMESTAMP\tPartition:0\tOffset:1\tNO_HEADERS\tk\tv\n",
        ),
    ],
)
def test_formatter_prints_kafkas_default_format(
    properties: dict[str, str], record: ConsumedRecord, expected: bytes
) -> None:
    assert MessageFormatter.of(properties).format(record) == expected
