"""The BROKER_LOGGER config resource: this process's logger levels, read and set at run time.

Kafka's ``Log4jController`` / ``ConfigAdminManager.validateLogLevelConfigs`` over Python's
``logging``: the resource is the broker's id; each config is a logger name (``root`` is the
root logger) and its level, one of Kafka's ``LogLevelConfig.VALID_LOG_LEVELS``. SET changes a
logger's level, DELETE unsets it (the logger inherits its parent's again; the root logger's
level cannot be removed); APPEND and SUBTRACT are refused. Nothing is stored in the metadata
log: as in Kafka, a logger level lasts until the process restarts. Python has no TRACE or
FATAL: TRACE is a level below DEBUG (5), FATAL is CRITICAL.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pykraft.broker.config_describe import DYNAMIC_BROKER_LOGGER_CONFIG, ConfigEntry
from pykraft.metadata.api.admin import AlterableConfig, AlterConfigOp
from pykraft.protocol.errors import Errors

# Kafka's ConfigResource.Type.BROKER_LOGGER.
BROKER_LOGGER = 8
ROOT_LOGGER = "root"
TRACE = 5
# Kafka's LogLevelConfig.VALID_LOG_LEVELS, in its order, as Python levels.
LOG_LEVELS = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}
_NAMES = {level: name for name, level in LOG_LEVELS.items()}


def _exists(name: str) -> bool:
    return name == ROOT_LOGGER or name in logging.root.manager.loggerDict


def _logger(name: str) -> logging.Logger:
    return logging.getLogger() if name == ROOT_LOGGER else logging.getLogger(name)


def _level_name(level: int) -> str:
    return _NAMES.get(level, logging.getLevelName(level))


def logger_entries(keys: frozenset[str] | None) -> tuple[ConfigEntry, ...]:
    """Every logger (Kafka's ``Log4jController.loggers``) with its effective level."""
    loggers = logging.root.manager.loggerDict.items()
    names = [ROOT_LOGGER, *sorted(n for n, one in loggers if isinstance(one, logging.Logger))]
    return tuple(
        ConfigEntry(
            name=name,
            value=_level_name(_logger(name).getEffectiveLevel()),
            source=DYNAMIC_BROKER_LOGGER_CONFIG,
            synonyms=(),
        )
        for name in names
        if keys is None or name in keys
    )


def _problem(config: AlterableConfig) -> tuple[Errors, str] | None:
    name = config.name
    if config.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
        return (
            Errors.INVALID_REQUEST,
            f"{config.op.name} operation is not allowed for the BROKER_LOGGER resource",
        )
    if not _exists(name):
        return Errors.INVALID_CONFIG, f"Logger {name} does not exist!"
    if config.op is AlterConfigOp.DELETE:
        if name == ROOT_LOGGER:
            return (
                Errors.INVALID_REQUEST,
                f"Removing the log level of the {ROOT_LOGGER} logger is not allowed",
            )
        return None
    if config.value not in LOG_LEVELS:
        return (
            Errors.INVALID_CONFIG,
            f"Cannot set the log level of {name} to {config.value} as it is not a supported "
            f"log level. Valid log levels are {', '.join(LOG_LEVELS)}",
        )
    return None


def alter_log_levels(
    configs: Sequence[AlterableConfig], *, validate_only: bool
) -> tuple[Errors, str | None]:
    """Validate every change, then (unless ``validate_only``) apply them all."""
    for config in configs:
        problem = _problem(config)
        if problem is not None:
            return problem
    if not validate_only:
        for config in configs:
            logger = _logger(config.name)
            if config.op is AlterConfigOp.DELETE:
                logger.setLevel(logging.NOTSET)
            else:
                assert config.value is not None, "checked by _problem"
                logger.setLevel(LOG_LEVELS[config.value])
    return Errors.NONE, None
