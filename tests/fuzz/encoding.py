"""Frame encoding of our own, so wrong types and sizes can be written (no codec checks)."""

from __future__ import annotations

import struct

import orjson

_FRAME_PREFIX = struct.Struct(">II")
_BINARY_FIXED = struct.Struct(">hbhiii")


def frame_bytes(header: bytes, body: bytes, serialize_type: int = 0) -> bytes:
    word = (serialize_type << 24) | (len(header) & 0xFFFFFF)
    return _FRAME_PREFIX.pack(4 + len(header) + len(body), word) + header + body


def json_header(fields: dict[str, object]) -> bytes:
    return orjson.dumps(fields)


def binary_header(code: int, opaque: int, ext: dict[str, str], *, flag: int = 0, version: int = 453,
                  language: int = 0, remark: bytes = b"") -> bytes:
    entries = bytearray()
    for key, value in ext.items():
        kb = key.encode("utf-8", "replace")[:65535]
        vb = value.encode("utf-8", "replace")
        entries += struct.pack(">H", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    fixed = _BINARY_FIXED.pack(
        _wrap16(code), _wrap8(language), _wrap16(version), _wrap32(opaque), _wrap32(flag), len(remark)
    )
    return fixed + remark + struct.pack(">i", len(entries)) + bytes(entries)


def _wrap16(v: int) -> int:
    return (v + 0x8000) % 0x10000 - 0x8000


def _wrap8(v: int) -> int:
    return (v + 0x80) % 0x100 - 0x80


def _wrap32(v: int) -> int:
    return (v + 0x80000000) % 0x100000000 - 0x80000000
