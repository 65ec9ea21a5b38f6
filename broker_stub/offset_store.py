"""Consumer offsets on disk: ``${storePathRootDir}/config/consumerOffset.json``, as a Java broker keeps them.

A Java broker's ConsumerOffsetManager writes its table every
``flushConsumerOffsetInterval`` (5 s) and at shutdown, and reads it back on
start, so a restarted broker knows where each group was, to within that
interval: a consumer that resumes on it re-reads at most the messages
committed since the last write (the duplicates a ``kill -9`` costs). The
stub does the same, in Java's shape (``offsetTable`` of ``topic@group`` ->
queue id -> offset), written atomically (temp file, fsync, rename) in a
worker thread so the event loop never waits for the disk.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from broker_stub.topic_store import TopicStoreError
from namesrv.durable import remove_stale_temp_files, write_atomic
from remoting import fastjson
from remoting.names import is_legal_group, is_legal_topic
from server_runtime.regular_file import RefusedFile, read_regular_file

log = logging.getLogger("broker_stub")

SEPARATOR = "@"  # ConsumerOffsetManager.TOPIC_GROUP_SEPARATOR
#: Largest offsets file read back: the table keeps at most 100,000 offsets
#: (broker_stub.consuming.MAX_CONSUMER_OFFSETS), each under ~300 bytes even with its own long key.
OFFSETS_FILE_MAX_BYTES = 64 * 1024 * 1024

#: (group, topic, queue id) -> offset, the broker's table (broker_stub.consuming)
Offsets = Mapping[tuple[str, str, int], int]


class OffsetFileError(TopicStoreError):
    """The offsets file exists but cannot be used; the text names the file and the problem
    (a store file error like a bad topics file: one line and exit 1 at start)."""


def offsets_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "consumerOffset.json")


def encode(offsets: Offsets) -> bytes:
    table: dict[str, dict[str, int]] = {}
    for (group, topic, queue_id), offset in offsets.items():
        table.setdefault(f"{topic}{SEPARATOR}{group}", {})[str(queue_id)] = offset
    return fastjson.dumps_fast({"offsetTable": table})


def load(path: str) -> dict[tuple[str, str, int], int]:
    """The saved table; empty when there is no file yet."""
    remove_stale_temp_files(path)
    try:
        raw = read_regular_file(path, OFFSETS_FILE_MAX_BYTES)
    except FileNotFoundError:
        return {}
    except RefusedFile as exc:  # a FIFO, a device, a directory or too large: nothing was read
        raise OffsetFileError(f"{path} {exc}") from None
    except OSError as exc:
        raise OffsetFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not raw.strip():
        return {}
    try:
        table = fastjson.loads(raw).get("offsetTable") or {}
        out: dict[tuple[str, str, int], int] = {}
        bad: list[str] = []
        for key, queues in table.items():
            topic, sep, group = str(key).rpartition(SEPARATOR)
            if not sep:
                continue
            if not (is_legal_topic(topic) and is_legal_group(group)):
                bad.append(str(key))
                continue
            for queue_id, offset in queues.items():
                out[(group, topic, int(queue_id))] = int(offset)
    except (ValueError, TypeError, AttributeError) as exc:  # BodyError is a ValueError
        raise OffsetFileError(f"{path} is not a consumer offsets file: {exc}") from None
    if bad:
        log.warning("%s: skipped the offsets of %d topic@group keys that are no legal names: %s", path, len(bad),
                    ", ".join(repr(key)[:60] for key in bad[:5]))
    return out


def save(path: str, offsets: Offsets) -> None:
    """Blocking: run it in a worker thread."""
    write_atomic(path, encode(offsets))


__all__ = ["OffsetFileError", "encode", "load", "offsets_path", "save"]
