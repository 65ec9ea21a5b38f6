"""The proxy's state: its named paths, and every operation the control endpoint offers on them.

One :class:`FaultProxy` per process. It is the only writer of the path table; each operation checks
its input (a :class:`~faultproxy.faults.FaultError` with an HTTP status names the problem) and logs
one line of what changed, so that the proxy's log tells when each fault began and ended.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import trio

from faultproxy.faults import FaultError, PathSpec, format_address, parse_path
from faultproxy.limits import MAX_CONNECTIONS, MAX_PATHS
from faultproxy.path import ConnectionBudget, Path
from server_runtime.ratelog import CLIP_ARGS, RateLimitedLog

log = logging.getLogger("faultproxy")
log.addFilter(CLIP_ARGS)


class FaultProxy:
    def __init__(self, nursery: trio.Nursery, *, max_connections: int = MAX_CONNECTIONS,
                 rng: random.Random | None = None) -> None:
        self.paths: dict[str, Path] = {}
        self.budget = ConnectionBudget(max_connections)
        self._nursery = nursery
        self._rng = rng or random.Random()
        self.ratelog = RateLimitedLog(log)

    def path(self, name: str) -> Path:
        try:
            return self.paths[name]
        except KeyError:
            raise FaultError(f"no path named {name}", 404) from None

    async def create(self, body: object) -> Path:
        spec = parse_path(body)
        if spec.name in self.paths:
            raise FaultError(f"a path named {spec.name} exists already", 409)
        return await self._add(spec)

    async def _add(self, spec: PathSpec) -> Path:
        if len(self.paths) >= MAX_PATHS:
            raise FaultError(f"the proxy serves {MAX_PATHS} paths, the most it may", 409)
        path = Path(spec, self._nursery, self.budget, self._rng, self.ratelog.warning)
        if spec.enabled:
            await path.enable()
        self.paths[spec.name] = path
        log.info("path %s: %s -> %s%s", path.name, format_address(*path.listen), format_address(*path.upstream),
                 "" if spec.enabled else " (refusing)")
        return path

    async def populate(self, body: object) -> list[Path]:
        """Toxiproxy's /populate: create each path, replacing one of the same name whose addresses differ."""
        if not isinstance(body, list):
            raise FaultError("populate takes a JSON list of paths")
        specs = [parse_path(item) for item in body]  # every one checked before any is changed
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise FaultError("populate lists a path name twice")
        done = []
        for spec in specs:
            old = self.paths.get(spec.name)
            if old is not None and _same(old, spec):
                await self.set_enabled(old, spec.enabled)
                done.append(old)
                continue
            if old is not None:
                self.delete(spec.name)
            done.append(await self._add(spec))
        return done

    def delete(self, name: str) -> None:
        self.path(name).close()
        del self.paths[name]
        log.info("path %s: deleted", name)

    async def update(self, name: str, body: object) -> Path:
        """Toxiproxy's update of a proxy, for ``enabled`` (false: refuse; true: accept again)."""
        path = self.path(name)
        if not isinstance(body, dict) or set(body) - {"enabled", "name", "listen", "upstream"}:
            raise FaultError("a path update is a JSON object with enabled")
        for key in ("listen", "upstream"):
            if key in body and body[key] != format_address(*getattr(path, key)):
                raise FaultError(f"the {key} address of a path cannot change: delete it and create another")
        enabled = body.get("enabled", path.enabled)
        if not isinstance(enabled, bool):
            raise FaultError(f"enabled must be true or false, got {enabled!r}")
        await self.set_enabled(path, enabled)
        return path

    async def set_enabled(self, path: Path, enabled: bool) -> None:
        if enabled and not path.enabled:
            await path.enable()
            log.info("path %s: accepting again on %s", path.name, format_address(*path.listen))
        elif not enabled and path.enabled:
            reset = path.refuse()
            log.info("path %s: refusing connections on %s (%d live connection(s) reset)", path.name,
                     format_address(*path.listen), reset)

    def add_toxic(self, name: str, body: object) -> dict[str, Any]:
        path = self.path(name)
        toxic = path.add_toxic(body)
        log.info("path %s: toxic %s added: %s on %s %s", name, toxic.name, toxic.type, toxic.stream,
                 dict(toxic.attributes) or "")
        return toxic.to_json()

    def update_toxic(self, name: str, toxic_name: str, body: object) -> dict[str, Any]:
        toxic = self.path(name).update_toxic(toxic_name, body)
        log.info("path %s: toxic %s now %s", name, toxic.name, dict(toxic.attributes))
        return toxic.to_json()

    def remove_toxic(self, name: str, toxic_name: str) -> None:
        self.path(name).remove_toxic(toxic_name)
        log.info("path %s: toxic %s removed", name, toxic_name)

    def reset_connections(self, name: str) -> int:
        count = self.path(name).reset_links()
        log.info("path %s: %d live connection(s) reset", name, count)
        return count

    async def heal(self, name: str | None = None) -> list[Path]:
        """Remove the toxics of one path (or all) and let it accept again."""
        paths = [self.path(name)] if name is not None else list(self.paths.values())
        for path in paths:
            path.heal()
            await self.set_enabled(path, True)
        log.info("%s healed: no toxics, accepting", f"path {name}" if name else "every path")
        return paths


def _same(path: Path, spec: PathSpec) -> bool:
    """Whether an existing path already is what ``spec`` asks for (port 0 asks for any port)."""
    listen_ok = spec.listen[0] == path.listen[0] and spec.listen[1] in (0, path.listen[1])
    return listen_ok and spec.upstream == path.upstream and spec.max_connections == path.max_connections
