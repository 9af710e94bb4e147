"""Kafka-style ``.properties`` files: parsing and typed lookups with Kafka's defaults.

The format is Java's ``Properties``: ``key=value`` or ``key: value`` lines, ``#`` or ``!``
comments, blank lines ignored, a trailing backslash continues a line. Every lookup names the
property and the file in its error, so a typo in a config file reads as a sentence.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs


class ConfigError(ValueError):
    """A configuration file or property is missing or invalid."""


@attrs.frozen
class Properties:
    values: Mapping[str, str]
    source: str = "<properties>"

    @classmethod
    def load(cls, path: Path) -> Properties:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read config file {path}: {error.strerror}") from error
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<properties>") -> Properties:
        values: dict[str, str] = {}
        for number, line in _logical_lines(text):
            separator = _separator_index(line)
            if separator < 0:
                raise ConfigError(f"{source}:{number}: expected key=value, got {line!r}")
            key = line[:separator].strip()
            if not key:
                raise ConfigError(f"{source}:{number}: empty property name")
            values[key] = line[separator + 1 :].strip()
        return cls(values=values, source=source)

    def get_str(self, name: str, default: str | None = None) -> str:
        value = self.values.get(name, default)
        if value is None:
            raise ConfigError(f"{self.source}: missing required property {name}")
        return value

    def get_int(self, name: str, default: int | None = None) -> int:
        raw = self.values.get(name)
        if raw is None:
            if default is None:
                raise ConfigError(f"{self.source}: missing required property {name}")
            return default
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{self.source}: {name}={raw!r} is not an integer") from None

    def get_bool(self, name: str, default: bool) -> bool:
        raw = self.values.get(name)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"{self.source}: {name}={raw!r} must be true or false")
        return lowered == "true"

    def get_list(self, name: str, default: str | None = None) -> list[str]:
        return [item.strip() for item in self.get_str(name, default).split(",") if item.strip()]


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join backslash continuations; drop comments and blank lines; keep 1-based numbers."""
    lines: list[tuple[int, str]] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip() if not pending else raw.lstrip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        lines.append((start, pending + stripped))
        pending = ""
    if pending:
        lines.append((start, pending))
    return lines


def _separator_index(line: str) -> int:
    positions = [index for index in (line.find("="), line.find(":")) if index >= 0]
    return min(positions) if positions else -1
