"""The control endpoint's HTTP/1.1, sans-IO: a request head parsed from bytes, a response rendered to bytes.

Only what a control client needs: one request per connection (every answer says ``Connection:
close``), a body only by ``Content-Length`` (a chunked body is refused), JSON both ways. Every size is
bounded (:mod:`faultproxy.limits`) and every malformed input is an :class:`HttpError` with the status
to answer, never an exception that could end the server.

A web page must not drive the proxy through the user's browser (a form can POST to 127.0.0.1): a
request with an ``Origin`` header or a browser's ``User-Agent`` is refused (Toxiproxy refuses browsers
for the same reason).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from faultproxy.limits import MAX_BODY_BYTES

MAX_HEADERS = 64
REASONS = {200: "OK", 201: "Created", 204: "No Content", 400: "Bad Request", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 409: "Conflict", 411: "Length Required",
           413: "Content Too Large", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported"}
_METHODS = ("GET", "POST", "DELETE", "PUT", "PATCH", "HEAD", "OPTIONS")


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class RequestHead:
    method: str
    path: str  # the target without its query
    content_length: int


def parse_head(head: bytes) -> RequestHead:
    """A request line and headers (without the blank line that ends them)."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise HttpError(400, "the request head is not ASCII") from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[0] not in _METHODS or not parts[1].startswith("/"):
        raise HttpError(400, "malformed request line")
    if parts[2] not in ("HTTP/1.1", "HTTP/1.0"):
        raise HttpError(505, f"{parts[2][:20]!r} is not HTTP/1.1")
    if len(lines) - 1 > MAX_HEADERS:
        raise HttpError(431, f"more than {MAX_HEADERS} header lines")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
            raise HttpError(400, "malformed header line")
        headers[name.lower()] = value.strip()
    if "origin" in headers or headers.get("user-agent", "").startswith("Mozilla/"):
        raise HttpError(403, "the control endpoint does not answer browsers")
    if "transfer-encoding" in headers:
        raise HttpError(501, "send the body with Content-Length, not Transfer-Encoding")
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit() or len(length_text) > 12:
        raise HttpError(400, "Content-Length is not a number")
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise HttpError(413, f"a body of {length} bytes is over the {MAX_BODY_BYTES}-byte limit")
    return RequestHead(parts[0], parts[1].split("?", 1)[0], length)


def parse_json(body: bytes) -> Any:
    """The body as JSON (None when empty)."""
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # RecursionError: [[[[...]]]] nested deeper than Python goes
        raise HttpError(400, f"the body is not JSON ({str(exc)[:80]})") from None


def render(status: int, payload: Any = None) -> bytes:
    """A whole response: a JSON body (none for 204), and ``Connection: close``."""
    body = b"" if status == 204 else json.dumps(payload).encode() + b"\n"
    head = (f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    return head.encode("ascii") + body


def error(status: int, message: str) -> bytes:
    """Toxiproxy's error shape: ``{"error": ..., "status": ...}``."""
    return render(status, {"error": message, "status": status})
