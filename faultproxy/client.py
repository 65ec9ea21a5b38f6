"""A blocking client of the fault proxy's control endpoint, for commands, scenarios and tests.

No Typer, no Rich, no trio: the standard library's ``http.client``, one connection per call, a
timeout on each. Every failure is one :class:`FaultProxyError` whose message names the proxy and the
problem. Beside the resource calls (Toxiproxy's: paths, toxics, enabled) it offers the vocabulary as
verbs: :meth:`~FaultProxyClient.refuse`, :meth:`~FaultProxyClient.blackhole`,
:meth:`~FaultProxyClient.partition`, :meth:`~FaultProxyClient.latency`,
:meth:`~FaultProxyClient.bandwidth`, :meth:`~FaultProxyClient.reset` and :meth:`~FaultProxyClient.heal`.
A verb sets its toxic whether or not the path had one of that kind already (a second latency replaces
the first), so that calling it twice is harmless. From trio code, call it in a thread
(``trio.to_thread.run_sync``).
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

from faultproxy.faults import STREAMS, FaultError, parse_address

#: The most of an answer read (the whole path table of 4,096 paths is about 3 MB).
MAX_ANSWER_BYTES = 16 * 1024 * 1024


class FaultProxyError(Exception):
    """A control call failed; the message is one line. ``status`` is the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def _streams(stream: str) -> tuple[str, ...]:
    if stream == "both":
        return STREAMS
    if stream not in STREAMS:
        raise FaultProxyError(f"stream must be upstream, downstream or both, got {stream!r}")
    return (stream,)


class FaultProxyClient:
    def __init__(self, addr: str, timeout: float = 5.0) -> None:
        try:
            self.host, self.port = parse_address(addr, "fault proxy address")
        except FaultError as exc:
            raise FaultProxyError(str(exc)) from None
        self.addr = addr
        self.timeout = timeout

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; its JSON answer (None for 204)."""
        data = None if body is None else json.dumps(body).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read(MAX_ANSWER_BYTES)
        except (OSError, http.client.HTTPException) as exc:
            why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
            raise FaultProxyError(f"fault proxy at {self.addr}: {why}") from None
        finally:
            conn.close()
        try:
            answer = json.loads(raw) if raw.strip() else None
        except ValueError:
            raise FaultProxyError(f"fault proxy at {self.addr}: answered {resp.status} with no JSON",
                                  resp.status) from None
        if resp.status >= 400:
            message = answer.get("error") if isinstance(answer, dict) else None
            raise FaultProxyError(f"fault proxy at {self.addr}: {message or f'HTTP {resp.status}'}", resp.status)
        return answer

    # --- resources (Toxiproxy's) ----------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        return self.call("GET", "/version")

    def paths(self) -> dict[str, dict[str, Any]]:
        return self.call("GET", "/proxies")

    def path(self, name: str) -> dict[str, Any]:
        return self.call("GET", f"/proxies/{_q(name)}")

    def create_path(self, name: str, listen: str, upstream: str, *, enabled: bool = True) -> dict[str, Any]:
        return self.call("POST", "/proxies", {"name": name, "listen": listen, "upstream": upstream, "enabled": enabled})

    def populate(self, paths: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Create (or replace) several paths in one call; returns them with their bound ports."""
        return self.call("POST", "/populate", list(paths))["proxies"]

    def delete_path(self, name: str) -> None:
        self.call("DELETE", f"/proxies/{_q(name)}")

    def set_enabled(self, name: str, enabled: bool) -> dict[str, Any]:
        return self.call("POST", f"/proxies/{_q(name)}", {"enabled": enabled})

    def add_toxic(self, path: str, kind: str, stream: str, attributes: Mapping[str, int] | None = None,
                  name: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"type": kind, "stream": stream, "attributes": dict(attributes or {})}
        if name is not None:
            body["name"] = name
        return self.call("POST", f"/proxies/{_q(path)}/toxics", body)

    def remove_toxic(self, path: str, name: str) -> None:
        self.call("DELETE", f"/proxies/{_q(path)}/toxics/{_q(name)}")

    def set_toxic(self, path: str, kind: str, stream: str, attributes: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Add the toxic named ``KIND_STREAM``, or change its attributes if the path has it."""
        name = f"{kind}_{stream}"
        try:
            return self.call("POST", f"/proxies/{_q(path)}/toxics/{_q(name)}", {"attributes": dict(attributes or {})})
        except FaultProxyError as exc:
            if exc.status != 404 or "no toxic" not in str(exc):
                raise
        return self.add_toxic(path, kind, stream, attributes, name)

    # --- the vocabulary ---------------------------------------------------------------------------

    def refuse(self, path: str) -> dict[str, Any]:
        """Connects are refused and live connections reset, until healed."""
        return self.set_enabled(path, False)

    def blackhole(self, path: str, stream: str = "both") -> dict[str, Any]:
        """Accept, and drop what ``stream`` carries (a close too), until healed."""
        for s in _streams(stream):
            self.set_toxic(path, "blackhole", s)
        return self.path(path)

    def partition(self, path: str) -> dict[str, Any]:
        """Nothing crosses the path either way, and connections stay open: a silent network partition."""
        return self.blackhole(path, "both")

    def latency(self, path: str, millis: int, jitter: int = 0, stream: str = "both") -> dict[str, Any]:
        for s in _streams(stream):
            self.set_toxic(path, "latency", s, {"latency": millis, "jitter": jitter})
        return self.path(path)

    def bandwidth(self, path: str, rate_kbps: int, stream: str = "both") -> dict[str, Any]:
        """At most ``rate_kbps`` x 1000 bytes a second on ``stream``."""
        for s in _streams(stream):
            self.set_toxic(path, "bandwidth", s, {"rate": rate_kbps})
        return self.path(path)

    def reset(self, path: str) -> int:
        """A TCP RST on every live connection of the path now; returns how many."""
        return int(self.call("POST", f"/proxies/{_q(path)}/reset_connections")["reset"])

    def heal(self, path: str | None = None) -> None:
        """No toxics and accepting, on one path or every path."""
        if path is None:
            self.call("POST", "/reset")
        else:
            self.call("POST", f"/proxies/{_q(path)}/heal")


def _q(name: str) -> str:
    return quote(name, safe="")


def describe_faults(path: Mapping[str, Any]) -> str:
    """A path's faults in a few words (``refusing``, ``partition``, ``blackhole upstream``,
    ``latency 200±20 ms both``); a blackhole on both streams is a partition."""
    words = [] if path.get("enabled", True) else ["refusing"]
    by_kind: dict[tuple[str, str], list[str]] = {}
    for toxic in path.get("toxics", []):
        a = toxic.get("attributes", {})
        kind = toxic.get("type", "?")
        what = {"latency": f"latency {a.get('latency', 0)}" + (f"±{a['jitter']}" if a.get("jitter") else "") + " ms",
                "bandwidth": f"bandwidth {a.get('rate', 0)} KB/s"}.get(kind, kind)
        by_kind.setdefault((kind, what), []).append(toxic.get("stream", "?"))
    for (_, what), streams in by_kind.items():
        both = set(streams) == set(STREAMS)
        words.append("partition" if both and what == "blackhole" else f"{what} {'both' if both else streams[0]}")
    return ", ".join(words) or "-"
