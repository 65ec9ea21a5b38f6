"""KV config requests (PUT/GET/DELETE, list by namespace), with size bounds.

Java bounds nothing here, and one KV namespace is special: REGISTER_BROKER
answers carry the whole ``ORDER_TOPIC_CONFIG`` table, so two 9 MiB values
made every registration answer larger than the brokers' frame limit, and
every broker lost its route. Here a PUT is refused (SYSTEM_ERROR, with a
remark naming the bound) when its namespace, key or value is too long, or
when it would grow its namespace past ``kvNamespaceMaxBytes`` (or past what
fits in a frame) or the whole table past ``kvTotalMaxBytes``. Sizes are
those of the JSON that answers and the file carry. A DELETE is never
refused, and a PUT that does not grow an already oversized namespace (one
loaded from a file written elsewhere) is accepted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Hashable

from namesrv.config import NamesrvConfig
from namesrv.counters import NamesrvCounters
from namesrv.kvconfig import KVConfig
from remoting.bodies import encode_kv_table
from remoting.codes import NAMESPACE_ORDER_TOPIC_CONFIG, ResponseCode
from remoting.command import RemotingCommand, response_to

log = logging.getLogger("namesrv")

#: Room left in a frame for the header of an answer that carries a KV table.
ANSWER_HEADROOM = 64 * 1024
#: Seconds between two warnings about an order table left out of answers.
_WARN_INTERVAL = 60.0
_last_warning = [float("-inf")]


def table_limit(config: NamesrvConfig) -> int:
    """The largest encoded namespace table an answer may carry."""
    return min(config.kvNamespaceMaxBytes, config.frameMaxLength - ANSWER_HEADROOM)


def _too_long(what: str, text: str, limit: int, key_name: str) -> str | None:
    size = len(text.encode("utf-8"))
    if size > limit:
        return f"KV {what} of {size} bytes is longer than {key_name} ({limit})"
    return None


class KVRequests:
    """Handlers of the KV request codes; the NameServer processor owns one and routes the codes to it."""

    def __init__(
        self,
        config: NamesrvConfig,
        kv: KVConfig,
        persist: Callable[[str, bytes], Awaitable[None]],
        counters: NamesrvCounters,
    ) -> None:
        self.config = config
        self.kv = kv
        self.persist = persist
        self.counters = counters

    def _kv_refusal(self, namespace: str, key: str, value: str) -> str | None:
        config = self.config
        return (
            _too_long("namespace", namespace, config.kvKeyMaxBytes, "kvKeyMaxBytes")
            or _too_long("key", key, config.kvKeyMaxBytes, "kvKeyMaxBytes")
            or _too_long("value", value, config.kvValueMaxBytes, "kvValueMaxBytes")
        )

    def _growth_refusal(self, namespace: str, total: int) -> str | None:
        """Why a PUT that grew ``namespace`` (the table now ``total`` bytes) must be undone."""
        ns = self.kv.table.get(namespace)
        size = len(encode_kv_table(ns)) if ns else 0
        limit = table_limit(self.config)
        if size > limit:
            return f"KV namespace {namespace[:60]!r} would take {size} bytes, more than {limit} (kvNamespaceMaxBytes)"
        if total > self.config.kvTotalMaxBytes:
            return f"KV table would take {total} bytes, more than kvTotalMaxBytes ({self.config.kvTotalMaxBytes})"
        return None

    async def _kv_change(self, req: RemotingCommand, namespace: str, key: str, value: str | None) -> RemotingCommand:
        if value is not None:
            refusal = self._kv_refusal(namespace, key, value)
            if refusal is not None:
                self.counters.refused("kv_size")
                return response_to(req, ResponseCode.SYSTEM_ERROR, refusal)
        before = self.kv.get(namespace, key)
        had_namespace = namespace in self.kv.table
        self.kv.put(namespace, key, value)

        def undo() -> None:
            if self.kv.get(namespace, key) == value:
                self.kv.put(namespace, key, before)
            if not had_namespace and not self.kv.table.get(namespace):
                self.kv.table.pop(namespace, None)

        snapshot = self.kv.snapshot()
        if value is not None and (before is None or len(value.encode()) > len(before.encode())):
            refusal = self._growth_refusal(namespace, len(snapshot))
            if refusal is not None:
                undo()
                self.counters.refused("kv_size")
                return response_to(req, ResponseCode.SYSTEM_ERROR, refusal)
        try:
            await self.persist(self.kv.path, snapshot)
        except OSError as exc:
            # Not on disk, so not acknowledged: memory must match the file
            # (unless a later request changed the key again meanwhile).
            undo()
            log.error("cannot persist KV config to %s: %s", self.kv.path, exc)
            return response_to(req, ResponseCode.SYSTEM_ERROR, f"cannot persist KV config: {exc}")
        return response_to(req, ResponseCode.SUCCESS)

    async def put_kv_config(self, req: RemotingCommand) -> RemotingCommand:
        namespace, key = req.ext("namespace"), req.ext("key")
        if namespace is None or key is None:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        return await self._kv_change(req, namespace, key, req.ext("value"))

    async def delete_kv_config(self, req: RemotingCommand) -> RemotingCommand:
        namespace, key = req.ext("namespace"), req.ext("key")
        if namespace is None or key is None:
            return response_to(req, ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        return await self._kv_change(req, namespace, key, None)

    def get_kv_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        namespace, key = req.ext("namespace"), req.ext("key")
        value = self.kv.get(namespace or "", key or "")
        if value is None:
            return response_to(
                req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}", {}
            )
        return response_to(req, ResponseCode.SUCCESS, ext_fields={"value": value})

    def kv_list(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        namespace = req.ext("namespace")
        table = self.kv.namespace(namespace or "")
        if table is None:
            return response_to(req, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
        body = encode_kv_table(table)
        if len(body) > self.config.frameMaxLength - ANSWER_HEADROOM:
            return response_to(req, ResponseCode.SYSTEM_ERROR, f"KV namespace of {len(body)} bytes does not fit a frame")
        return response_to(req, ResponseCode.SUCCESS, body=body)

    def order_conf_body(self) -> bytes:
        """The ORDER_TOPIC_CONFIG table for a REGISTER_BROKER answer (b"" if none or too big)."""
        orders = self.kv.table.get(NAMESPACE_ORDER_TOPIC_CONFIG)
        if orders is None:
            return b""
        body = encode_kv_table(orders)
        if len(body) > self.config.frameMaxLength - ANSWER_HEADROOM:
            # Only a table loaded from a file can get here (PUTs are bounded);
            # leaving it out keeps the broker's route, which matters more.
            now = time.monotonic()
            if now - _last_warning[0] >= _WARN_INTERVAL:
                _last_warning[0] = now
                log.warning("ORDER_TOPIC_CONFIG (%d bytes) left out of register answers: it does not fit a frame", len(body))
            return b""
        return body
