"""KV config: namespaced string settings, persisted in RocketMQ's kvConfig.json.

The table is plain state; :meth:`KVConfig.snapshot` gives the bytes to
persist, and the server writes them with :func:`namesrv.durable.write_atomic`
before it acknowledges a change, so an acknowledged PUT survives a crash.
"""

from __future__ import annotations

import orjson

from namesrv.durable import remove_stale_temp_files, write_atomic
from server_runtime.regular_file import RefusedFile, read_regular_file


class KVConfigError(Exception):
    """The KV file exists but cannot be read as RocketMQ's format."""


class KVConfig:
    def __init__(self, path: str) -> None:
        self.path = path
        self.table: dict[str, dict[str, str]] = {}
        self.entries = 0  # keys in all namespaces (kept as it changes, so the metrics never count)

    def load(self, max_bytes: int) -> None:
        """Read the file if present (missing means empty, as in Java).

        The file must be a regular file of at most ``max_bytes``
        (``kvTotalMaxBytes``, the bound every write keeps): anything else
        (a FIFO, a device, a directory, a larger file) is refused before a
        byte is read, so the server stops with one line instead of hanging
        or filling its memory.
        """
        remove_stale_temp_files(self.path)
        try:
            data = read_regular_file(self.path, max_bytes)
        except FileNotFoundError:
            return
        except RefusedFile as exc:
            hint = " (kvTotalMaxBytes)" if exc.oversize else ""
            raise KVConfigError(f"KV config {self.path} {exc}{hint}") from None
        except OSError as exc:
            raise KVConfigError(f"cannot read KV config {self.path}: {exc.strerror or exc}") from None
        if not data.strip():
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise KVConfigError(f"KV config {self.path} is not valid JSON: {exc}") from None
        table = obj.get("configTable") if isinstance(obj, dict) else None
        if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
            raise KVConfigError(f'KV config {self.path} has no {{"configTable": {{...}}}} object')
        for namespace, entries in table.items():
            ns = self.table.setdefault(str(namespace), {})
            for key, value in entries.items():
                if value is not None:
                    ns[str(key)] = value if isinstance(value, str) else orjson.dumps(value).decode()
        self.entries = sum(map(len, self.table.values()))

    def put(self, namespace: str, key: str, value: str | None) -> None:
        """Set a value; None deletes it (Java stores null, which reads as absent)."""
        if value is None:
            self.delete(namespace, key)
        else:
            ns = self.table.setdefault(namespace, {})
            self.entries += key not in ns
            ns[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        ns = self.table.get(namespace)
        return ns.get(key) if ns is not None else None

    def delete(self, namespace: str, key: str) -> None:
        ns = self.table.get(namespace)
        if ns is not None and ns.pop(key, None) is not None:
            self.entries -= 1

    def namespace(self, namespace: str) -> dict[str, str] | None:
        ns = self.table.get(namespace)
        return dict(ns) if ns is not None else None

    def snapshot(self) -> bytes:
        """The whole table as Java writes it: ``{"configTable":{...}}``."""
        return orjson.dumps({"configTable": self.table})

    def persist(self, data: bytes | None = None) -> None:
        """Write ``data`` (default: a fresh snapshot) atomically and durably."""
        write_atomic(self.path, self.snapshot() if data is None else data)
