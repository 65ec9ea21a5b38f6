"""The topic table on disk: ``${storePathRootDir}/config/topics.json``, as a Java broker keeps it.

A Java broker (TopicConfigManager) rewrites this file after every topic
change and reads it back on start, so a restarted broker registers the
topics it had. The stub does the same when ``storePathRootDir`` is set,
with the file in Java's shape (``topicConfigTable`` and ``dataVersion``),
written atomically and durably before the change is acknowledged. Messages
stay in memory either way.
"""

from __future__ import annotations

import os

from namesrv.durable import remove_stale_temp_files, write_atomic
from remoting import fastjson
from remoting.bodies import DataVersion, TopicConfig


class TopicStoreError(Exception):
    """The topics file exists but cannot be used; the text names the file and the problem."""


def topics_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "topics.json")


def load(path: str) -> tuple[list[TopicConfig], DataVersion | None]:
    """The saved topics and data version; nothing if the file does not exist yet."""
    remove_stale_temp_files(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return [], None
    except OSError as exc:
        raise TopicStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    if not raw.strip():
        return [], None  # Java treats an empty file as no topics yet
    try:
        doc = fastjson.loads(raw)
        table = doc.get("topicConfigTable") or {}
        if not isinstance(table, dict):
            raise TypeError("topicConfigTable is not an object")
        topics = [TopicConfig.from_obj(name, obj) for name, obj in table.items()]
        version = DataVersion.from_obj(doc["dataVersion"]) if isinstance(doc.get("dataVersion"), dict) else None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # BodyError is a ValueError
        raise TopicStoreError(f"{path} is not a topics file: {exc}") from None
    return topics, version


def encode(topics: list[TopicConfig], version: DataVersion) -> bytes:
    return fastjson.dumps_fast(
        {"dataVersion": version.to_obj(), "topicConfigTable": {tc.topic_name: tc.to_obj() for tc in topics}}
    )


def save(path: str, topics: list[TopicConfig], version: DataVersion) -> None:
    write_atomic(path, encode(topics, version))
