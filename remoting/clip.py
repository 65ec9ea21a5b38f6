"""Text that came from a peer, cut to a bound before it goes into a message or a log line.

An 8 MiB garbage header field must not become an 8 MB remark or log line.
Kept with the wire because the codec's own errors quote what a peer sent;
:mod:`server_runtime.ratelog` applies it to every log line of a server.
"""

from __future__ import annotations

#: Longest client-supplied text a log line or a remark carries (characters, ~bytes).
CLIP_BYTES = 200


def clip(value: object, limit: int = CLIP_BYTES) -> str:
    """``value`` as text of at most ``limit`` characters, marking what was cut."""
    text = value if isinstance(value, str) else repr(value) if isinstance(value, (bytes, bytearray)) else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text) - limit} more)"
