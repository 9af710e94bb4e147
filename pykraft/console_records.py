"""The pure record cores of ``pykraft console-producer`` and ``console-consumer``: Kafka's
``LineMessageReader`` (a line of standard input -> headers, key, value) and its
``DefaultMessageFormatter`` (a consumed record -> the bytes printed), driven by the tools'
``--property`` options.

Sources: Kafka's ``tools/src/main/java/org/apache/kafka/tools/LineMessageReader.java`` and
``tools/.../consumer/DefaultMessageFormatter.java`` (property names, defaults, the order of the
printed fields and their exact error messages). The Java reader's ``headers.separator`` is a
regular expression (``Pattern.split``); here it is split literally, which is the same for every
separator without regex metacharacters. ``key.deserializer``-style classes have no meaning here:
keys, values and headers are printed as their bytes (Kafka's default, no deserializer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

Header = tuple[str, bytes | None]


class ConsoleRecordError(ValueError):
    """Kafka's ``KafkaException`` of the line reader: the message is Kafka's."""


@attrs.frozen
class LineRecord:
    """One record read from a line: Kafka's ``ProducerRecord`` without its topic."""

    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def _true(properties: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in properties:
        return default
    return properties[name].strip().lower() == "true"


@attrs.frozen
class LineReader:
    """``LineMessageReader``'s settings (``--property`` / ``--reader-config``)."""

    parse_key: bool = False
    key_separator: str = "\t"
    parse_headers: bool = False
    headers_delimiter: str = "\t"
    headers_separator: str = ","
    headers_key_separator: str = ":"
    ignore_error: bool = False
    null_marker: str | None = None

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> LineReader:
        """Kafka's ``configure``: the same defaults and the same refusals of clashing separators."""
        reader = cls(
            parse_key=_true(properties, "parse.key", False),
            key_separator=properties.get("key.separator", "\t"),
            parse_headers=_true(properties, "parse.headers", False),
            headers_delimiter=properties.get("headers.delimiter", "\t"),
            headers_separator=properties.get("headers.separator", ","),
            headers_key_separator=properties.get("headers.key.separator", ":"),
            ignore_error=_true(properties, "ignore.error", False),
            null_marker=properties.get("null.marker"),
        )
        reader.check()
        return reader

    def check(self) -> None:
        delimiter, separator = self.headers_delimiter, self.headers_separator
        key_separator, null = self.headers_key_separator, self.null_marker
        pairs = [
            ("headers.delimiter", delimiter, "headers.separator", separator),
            ("headers.delimiter", delimiter, "headers.key.separator", key_separator),
            ("headers.separator", separator, "headers.key.separator", key_separator),
            ("null.marker", null, "key.separator", self.key_separator),
            ("null.marker", null, "headers.separator", separator),
            ("null.marker", null, "headers.delimiter", delimiter),
            ("null.marker", null, "headers.key.separator", key_separator),
        ]
        for first, first_value, second, second_value in pairs:
            if first_value == second_value:
                raise ConsoleRecordError(f"{first} and {second} may not be equal")

    def read(self, line: str, line_number: int) -> LineRecord:
        """The record of one line (without its line end); ``line_number`` counts from 1."""
        headers = self._part(
            self.parse_headers, line, 0, self.headers_delimiter, "headers delimiter", line_number
        )
        header_end = 0 if headers is None else len(headers) + len(self.headers_delimiter)
        key = self._part(
            self.parse_key, line, header_end, self.key_separator, "key separator", line_number
        )
        key_end = 0 if key is None else len(key) + len(self.key_separator)
        value = line[header_end + key_end :]
        parsed_headers: tuple[Header, ...] = ()
        if headers is not None and headers != self.null_marker:
            parsed_headers = tuple(
                self._header(pair, line_number) for pair in headers.split(self.headers_separator)
            )
        return LineRecord(self._bytes(key), self._bytes(value), parsed_headers)  # fmt: skip

    def _bytes(self, text: str | None) -> bytes | None:
        if text is None or text == self.null_marker:
            return None
        return text.encode()

    def _part(
        self, enabled: bool, line: str, start: int, demarcation: str, name: str, line_number: int
    ) -> str | None:
        if not enabled:
            return None
        index = line.find(demarcation, start)
        if index == -1:
            if self.ignore_error:
                return None
            raise ConsoleRecordError(f"No {name} found on line number {line_number}: '{line}'")
        return line[start:index]

    def _header(self, pair: str, line_number: int) -> Header:
        index = pair.find(self.headers_key_separator)
        if index == -1:
            if self.ignore_error:
                return pair, None
            raise ConsoleRecordError(
                f"No header key separator found in pair '{pair}' on line number {line_number}"
            )
        key = pair[:index]
        if key == self.null_marker:
            raise ConsoleRecordError(
                f"Header keys should not be equal to the null marker '{self.null_marker}' as "
                "they can't be null"
            )
        value = pair[index + len(self.headers_key_separator) :]
        return key, None if value == self.null_marker else value.encode()


@attrs.frozen
class ConsumedRecord:
    """What the formatter prints of a consumed record. ``timestamp_type`` is Kafka's
    ``TimestampType`` name: ``CreateTime``, ``LogAppendTime`` or ``NO_TIMESTAMP_TYPE``."""

    partition: int
    offset: int
    timestamp_type: str
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[Header] = ()


NO_TIMESTAMP_TYPE = "NO_TIMESTAMP_TYPE"


@attrs.frozen
class MessageFormatter:
    """``DefaultMessageFormatter``'s settings (``--property`` / ``--formatter-config``)."""

    print_timestamp: bool = False
    print_key: bool = False
    print_value: bool = True
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> MessageFormatter:
        def text(name: str, default: bytes) -> bytes:
            return properties[name].encode() if name in properties else default

        return cls(
            print_timestamp=_true(properties, "print.timestamp", False),
            print_key=_true(properties, "print.key", False),
            print_value=_true(properties, "print.value", True),
            print_partition=_true(properties, "print.partition", False),
            print_offset=_true(properties, "print.offset", False),
            print_headers=_true(properties, "print.headers", False),
            key_separator=text("key.separator", b"\t"),
            line_separator=text("line.separator", b"\n"),
            headers_separator=text("headers.separator", b","),
            null_literal=text("null.literal", b"null"),
        )

    def format(self, record: ConsumedRecord) -> bytes:
        """The bytes Kafka's ``writeTo`` prints: the chosen fields in Kafka's order, each but
        the last followed by ``key.separator``, the last by ``line.separator``."""
        fields: list[bytes] = []
        if self.print_timestamp:
            if record.timestamp_type == NO_TIMESTAMP_TYPE:
                fields.append(b"NO_TIMESTAMP")
            else:
                fields.append(f"{record.timestamp_type}:{record.timestamp}".encode())
        if self.print_partition:
            fields.append(f"Partition:{record.partition}".encode())
        if self.print_offset:
            fields.append(f"Offset:{record.offset}".encode())
        if self.print_headers:
            fields.append(self._headers(record.headers))
        if self.print_key:
            fields.append(self._or_null(record.key))
        if self.print_value:
            fields.append(self._or_null(record.value))
        if not fields:
            return b""
        return self.key_separator.join(fields) + self.line_separator

    def _or_null(self, data: bytes | None) -> bytes:
        return self.null_literal if data is None else data

    def _headers(self, headers: Sequence[Header]) -> bytes:
        if not headers:
            return b"NO_HEADERS"
        pairs = [key.encode() + b":" + self._or_null(value) for key, value in headers]
        return self.headers_separator.join(pairs)
