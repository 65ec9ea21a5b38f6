"""GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG.

An update is all or nothing: it is refused as a whole, before anything
changes, when its body is larger than ``configUpdateMaxBytes``, does not
parse, holds a control character in a key or value, names a refused key
(see :mod:`namesrv.config_policy`) or sets a value that is malformed, out
of range or would take routing down now. Otherwise it is written to the
``-c`` file (atomically, with Java's ``Properties.store`` escaping, so the
file parses back to exactly the accepted keys and values) and applied.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Hashable

from namesrv import config_policy
from namesrv.config import ConfigError, NamesrvConfig
from namesrv.counters import NamesrvCounters
from remoting import properties
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand, response_to

log = logging.getLogger("namesrv")


class ConfigRequests:
    """Handlers of the config request codes; the NameServer processor owns one and routes the codes to it."""

    def __init__(
        self,
        config: NamesrvConfig,
        persist: Callable[[str, bytes], Awaitable[None]],
        counters: NamesrvCounters,
        *,
        sync_options: Callable[[], None],
        runtime_state: Callable[[], config_policy.RuntimeState],
    ) -> None:
        self.config = config
        self.persist = persist
        self.counters = counters
        self.sync_options = sync_options  # the processor's: pushes an applied update into the route table
        self.runtime_state = runtime_state  # the processor's: what the in-use floors are checked against

    def get_config(self, req: RemotingCommand, conn: Hashable) -> RemotingCommand:
        text = self.config.render(public=True)
        return response_to(req, ResponseCode.SUCCESS, body=text.encode() if text.strip() else b"")

    def _validated_update(self, body: bytes) -> tuple[NamesrvConfig, dict[str, str]]:
        """The config an update body asks for; UpdateRefused says why not."""
        limit = self.config.configUpdateMaxBytes
        if len(body) > limit:
            self.counters.refused("config_update_size")
            raise config_policy.UpdateRefused(
                f"config update body of {len(body)} bytes is larger than configUpdateMaxBytes ({limit})"
            )
        try:
            props = properties.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, properties.PropertiesError):
            raise config_policy.UpdateRefused("string2Properties error") from None
        config_policy.check_text(props)
        config_policy.check_classes(props, self.config)
        updated = copy.deepcopy(self.config)
        for key, value in props.items():
            if key in updated.extra:  # Java updates only keys it already has
                updated.extra[key] = value
        try:
            updated.apply(updated.parse_values(props))
            updated.validate()  # tls.* values too: a bad one would stop the next start
        except ConfigError as exc:
            raise config_policy.UpdateRefused(f"invalid config value: {exc}") from None
        config_policy.check_update(updated, self.config, self.runtime_state())
        return updated, props

    async def update_config(self, req: RemotingCommand) -> RemotingCommand:
        if not req.body:
            return response_to(req, ResponseCode.SUCCESS)
        try:
            updated, props = self._validated_update(req.body)
        except config_policy.UpdateRefused as exc:
            code = ResponseCode.NO_PERMISSION if exc.permission else ResponseCode.SYSTEM_ERROR
            log.warning("refused config update: %s", exc.remark[:200])
            return response_to(req, code, exc.remark)
        try:
            await self.persist(updated.configStorePath, updated.render().encode())
        except OSError as exc:
            log.error("cannot persist config to %s: %s", updated.configStorePath, exc)
            return response_to(req, ResponseCode.SYSTEM_ERROR, f"cannot persist config: {exc}")
        self.config.apply({k: getattr(updated, k) for k in NamesrvConfig.keys()})
        self.config.extra = updated.extra
        self.sync_options()
        log.info("config updated: %s", ", ".join(f"{k}={v}" for k, v in props.items())[:500])
        return response_to(req, ResponseCode.SUCCESS)
