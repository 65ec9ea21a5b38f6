"""RocketMQ's rules for topic and group names, and the check that a store path stays in its store.

Why one module: a broker keeps each topic's messages in a directory named
after the topic, and a retry or dead-letter topic is ``%RETRY%`` or
``%DLQ%`` plus a group name from the wire. A name that is not a legal
RocketMQ name must never reach the file system, so every entry point (a
send, a heartbeat, a send-back, a topic or group change, a file read back
at start) asks the same functions, and the remarks are Java's own.

The rules are Apache RocketMQ 5.3.3's: TopicValidator.validateTopic
(blank, then characters outside ``^[%|a-zA-Z0-9_-]+$``, then more than 127
characters) and Validators.checkGroup (blank, more than 255 characters,
illegal characters). 4.9.7 has the same rules; its broker answers a bad
topic with SYSTEM_ERROR where 5.3.3 answers INVALID_PARAMETER, and it
does not check group names at all (5.3.3's subscription-group manager
does, so a heartbeat with an illegal group creates nothing).

The pattern is matched whole (``fullmatch``): a Python ``$`` would also
accept a name ending in a newline.
"""

from __future__ import annotations

import os
import re

LEGAL_NAME = re.compile(r"[%|a-zA-Z0-9_-]+")
TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

TOPIC_BLANK_REMARK = "The specified topic is blank."
TOPIC_ILLEGAL_REMARK = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOPIC_TOO_LONG_REMARK = "The specified topic is longer than topic max length."


def topic_problem(name: str) -> str | None:
    """TopicValidator.validateTopic's remark for an illegal topic name, None for a legal one."""
    if not name or name.isspace():
        return TOPIC_BLANK_REMARK
    if LEGAL_NAME.fullmatch(name) is None:
        return TOPIC_ILLEGAL_REMARK
    if len(name) > TOPIC_MAX_LENGTH:
        return TOPIC_TOO_LONG_REMARK
    return None


def group_problem(name: str) -> str | None:
    """Validators.checkGroup's text for an illegal group name, None for a legal one."""
    if not name or name.isspace():
        return "the specified group is blank"
    if len(name) > GROUP_MAX_LENGTH:
        return f"the specified group is longer than group max length {GROUP_MAX_LENGTH}."
    if LEGAL_NAME.fullmatch(name) is None:
        return f"the specified group[{name[:80]}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return None


def is_legal_topic(name: object) -> bool:
    return isinstance(name, str) and topic_problem(name) is None


def is_legal_group(name: object) -> bool:
    return isinstance(name, str) and group_problem(name) is None


class PathOutsideError(ValueError):
    """A store path that resolves (through ``..`` or a symbolic link) outside its store directory."""


def resolve_inside(root: str, *parts: str) -> str:
    """``root/parts...`` with every link resolved; PathOutsideError unless it stays under ``root``
    (itself resolved). Defence in depth behind the name rules: a name is checked where it arrives,
    and the path it becomes is checked again where a file is made, opened or deleted."""
    base = os.path.realpath(root)
    path = os.path.realpath(os.path.join(base, *parts))
    if path != base and not path.startswith(base + os.sep):
        shown = os.path.join(*parts) if parts else root
        raise PathOutsideError(f"the store path {shown!r} resolves to {path}, outside {base}")
    return path


__all__ = [
    "DLQ_GROUP_TOPIC_PREFIX",
    "GROUP_MAX_LENGTH",
    "LEGAL_NAME",
    "RETRY_GROUP_TOPIC_PREFIX",
    "TOPIC_BLANK_REMARK",
    "TOPIC_ILLEGAL_REMARK",
    "TOPIC_MAX_LENGTH",
    "TOPIC_TOO_LONG_REMARK",
    "PathOutsideError",
    "group_problem",
    "is_legal_group",
    "is_legal_topic",
    "resolve_inside",
    "topic_problem",
]
