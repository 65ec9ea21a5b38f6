"""Subscription groups (SubscriptionGroupManager): what ``updateSubGroup`` creates and 201 lists.

A Java broker starts with eight system groups (TOOLS_CONSUMER,
FILTERSRV_CONSUMER, SELF_TEST_C_GROUP, the CID_ONS* groups and
CID_RMQ_SYS_TRANS), creates a group on a consumer's first heartbeat
(``autoCreateSubscriptionGroup``, on by default) and keeps the table in
``${storePathRootDir}/config/subscriptionGroup.json`` (its shape:
``subscriptionGroupTable``, ``forbiddenTable``, ``dataVersion``), read back
on start. The stub does the same: with ``storePathRootDir`` set every
change is written atomically and durably before it is answered; without it
the table lives in memory. The table holds at most ``MAX_GROUPS`` groups: a
new group beyond that is refused (SYSTEM_ERROR naming the bound), an
auto-created one is simply not created.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from namesrv.durable import remove_stale_temp_files, write_atomic
from remoting.admin_bodies import SUBSCRIPTION_GROUP_DEFAULTS, subscription_group_config
from remoting.bodies import DataVersion
from remoting.mqjson import MqJsonError, loads
from remoting.names import is_legal_group
from server_runtime.regular_file import RefusedFile, read_regular_file

log = logging.getLogger("broker_stub")

MAX_GROUPS = 10_000
#: Largest subscription group file read back: MAX_GROUPS groups of ~1 KB as Java writes them, with room.
GROUPS_FILE_MAX_BYTES = 32 * 1024 * 1024
SYSTEM_GROUPS = ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP")
BROADCAST_SYSTEM_GROUPS = ("CID_ONS-HTTP-PROXY", "CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
                           "CID_RMQ_SYS_TRANS")


class SubscriptionGroupError(Exception):
    """The subscription group file exists but cannot be used, or a change cannot be applied."""


def groups_path(store_root: str) -> str:
    return os.path.join(os.path.expanduser(store_root), "config", "subscriptionGroup.json")


def default_group(name: str) -> dict[str, Any]:
    return dict(SUBSCRIPTION_GROUP_DEFAULTS, groupName=name)


def _illegal_name(cfg: object) -> bool:
    """A saved group whose name is a string but no legal group name (it never becomes anything)."""
    return isinstance(cfg, dict) and isinstance(cfg.get("groupName"), str) and not is_legal_group(cfg["groupName"])


class SubscriptionGroups:
    def __init__(self, path: str | None = None, *, clock_ms: Callable[[], int] | None = None) -> None:
        self.path = path
        self.clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.table: dict[str, dict[str, Any]] = {}
        self.forbidden: dict[str, dict[str, int]] = {}
        self.data_version = DataVersion(0, self.clock_ms(), 0)
        for name in SYSTEM_GROUPS:
            self.table[name] = default_group(name)
        for name in BROADCAST_SYSTEM_GROUPS:
            self.table[name] = dict(default_group(name), consumeBroadcastEnable=True)
        if path:
            self._load(path)

    def _load(self, path: str) -> None:
        """The saved table over the system groups, as ConfigManager.load does (an empty file is no groups)."""
        remove_stale_temp_files(path)
        try:
            raw = read_regular_file(path, GROUPS_FILE_MAX_BYTES)
        except FileNotFoundError:
            return
        except RefusedFile as exc:  # a FIFO, a device, a directory or too large: nothing was read
            raise SubscriptionGroupError(f"{path} {exc}") from None
        except OSError as exc:
            raise SubscriptionGroupError(f"cannot read {path}: {exc.strerror or exc}") from None
        if not raw.strip():
            return
        try:
            doc = loads(raw)
            table = doc.get("subscriptionGroupTable") or {}
            if not isinstance(table, dict):
                raise MqJsonError("subscriptionGroupTable is not an object")
            entries = list(table.values())[:MAX_GROUPS]
            bad = [cfg["groupName"] for cfg in entries if _illegal_name(cfg)]  # skipped; a malformed entry fails the file
            groups = [subscription_group_config(cfg) for cfg in entries if not _illegal_name(cfg)]
            version = DataVersion.from_obj(doc["dataVersion"]) if isinstance(doc.get("dataVersion"), dict) else None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:  # MqJsonError and BodyError are ValueErrors
            raise SubscriptionGroupError(f"{path} is not a subscription group file: {exc}") from None
        if bad:
            log.warning("%s: skipped %d groups whose names are no legal group names: %s", path, len(bad),
                        ", ".join(repr(name)[:60] for name in bad[:5]))
        for cfg in groups:
            self.table[cfg["groupName"]] = cfg
        if version is not None:
            self.data_version = version.next(self.clock_ms())

    def __contains__(self, name: str) -> bool:
        return name in self.table

    def __len__(self) -> int:
        return len(self.table)

    def get(self, name: str) -> dict[str, Any] | None:
        return self.table.get(name)

    def find(self, name: str) -> dict[str, Any] | None:
        """findSubscriptionGroupConfig: the group, auto-created on first sight (None: illegal name, or full)."""
        if name not in self.table:
            self.auto_create(name)
        return self.table.get(name)

    def update(self, cfg: dict[str, Any]) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with a validated config (replaces an existing group)."""
        name = cfg["groupName"]
        if name not in self.table and len(self.table) >= MAX_GROUPS:
            raise SubscriptionGroupError(f"subscription group table full ({MAX_GROUPS} groups)")
        old = self.table.get(name)
        self.table[name] = cfg
        self._changed(lambda: self._restore(name, old))

    def delete(self, name: str) -> bool:
        old = self.table.pop(name, None)
        self.forbidden.pop(name, None)
        if old is None:
            return False
        self._changed(lambda: self._restore(name, old))
        return True

    def auto_create(self, name: str) -> bool:
        """findSubscriptionGroupConfig with autoCreateSubscriptionGroup: a consumer's group on first sight.
        Returns whether it was created (not when full, or when the name is not a legal group name)."""
        if name in self.table or len(self.table) >= MAX_GROUPS:
            return False
        try:
            cfg = subscription_group_config({"groupName": name})
        except MqJsonError:
            return False
        try:
            self.update(cfg)
        except SubscriptionGroupError as exc:
            log.error("auto-creating subscription group %s failed: %s", name, exc)
            return False
        log.info("auto create a subscription group, %s", name)
        return True

    def _restore(self, name: str, old: dict[str, Any] | None) -> None:
        if old is None:
            self.table.pop(name, None)
        else:
            self.table[name] = old

    def _changed(self, undo: Callable[[], None]) -> None:
        """Bump the version and persist before the change is answered; a failed write undoes it."""
        previous = self.data_version
        self.data_version = previous.next(self.clock_ms())
        if not self.path:
            return
        try:
            write_atomic(self.path, self.encode())
        except OSError as exc:
            undo()
            self.data_version = previous
            raise SubscriptionGroupError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def encode(self) -> bytes:
        """SubscriptionGroupManager.encode(): the 201 answer and the file's content. Plain JSON (no object
        keys, no doubles), so orjson writes it, fastjson's way (null fields left out): 10,000 groups in ~10 ms."""
        table = {name: {k: v for k, v in cfg.items() if v is not None} for name, cfg in self.table.items()}
        return orjson.dumps({
            "dataVersion": self.data_version.to_obj(),
            "forbiddenTable": self.forbidden,
            "subscriptionGroupTable": table,
        })


def group_body(cfg: dict[str, Any]) -> bytes:
    """One SubscriptionGroupConfig as fastjson writes it (null fields left out): the 352 answer."""
    return orjson.dumps({k: v for k, v in cfg.items() if v is not None})
