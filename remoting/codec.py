"""Sans-IO codec for RocketMQ remoting frames.

Feed bytes to a :class:`FrameDecoder`, get whole :class:`RemotingCommand`
objects out; give :func:`encode` a command, get the frame's bytes. Nothing
here touches a socket, so the same code serves the trio server, the clients
and the property tests, and every malformed input surfaces as a single
exception type, :class:`ProtocolError`.
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from remoting.clip import clip
from remoting.codes import (
    DEFAULT_FRAME_MAX_LENGTH,
    LANGUAGE_BY_NAME,
    LanguageCode,
    SerializeType,
)
from remoting.command import RemotingCommand

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_HEADER_LENGTH_MASK = 0xFFFFFF
_BINARY_FIXED = struct.Struct(">hbhiii")  # code, language, version, opaque, flag, remarkLength
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_FRAME_PREFIX = struct.Struct(">II")


#: The words of the error a frame over the length limit gives (the reactor counts those closes).
OVERSIZE_FRAME = "exceeds the limit"


class ProtocolError(Exception):
    """The peer sent something that is not a valid remoting frame.

    The only exception the decoder raises; a server answers it by closing
    that one connection, as Java's NettyDecoder does.
    """


# --------------------------------------------------------------------------
# decoding


class FrameDecoder:
    """Incremental frame parser for one connection.

    It keeps at most the bytes received and not yet decoded: frames not yet
    taken with :meth:`next` plus one partial frame, which is bounded by
    ``max_frame_length`` (an over-long declared length is refused as soon
    as its 4 bytes arrive). A server takes frames one at a time with
    :meth:`push` and :meth:`next`, so it can stop between two requests
    (its peer stopped reading answers) without decoding the rest; clients
    use :meth:`feed`, which takes every whole frame at once.
    """

    __slots__ = ("_broken", "_buf", "_need", "_pos", "_src", "max_frame_length")

    def __init__(self, max_frame_length: int = DEFAULT_FRAME_MAX_LENGTH) -> None:
        self._buf = bytearray()
        # Undecoded bytes are _src[_pos:]; _src is the caller's last chunk
        # (decoded in place, no copy) or _buf (a partial frame kept).
        self._src: bytes | bytearray = self._buf
        self._pos = 0
        self._need = 4
        self.max_frame_length = max_frame_length
        self._broken = False

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded."""
        return len(self._src) - self._pos

    @property
    def partial_frame_size(self) -> int:
        """Whole size (prefix included) of the incomplete frame :meth:`next` stopped at; 0 if
        its length is not known yet. Only meaningful after :meth:`next` returned None."""
        return self._need if self.buffered >= 4 else 0

    def push(self, data: bytes | bytearray) -> None:
        """Add received bytes (kept by reference until :meth:`next` runs out of whole frames)."""
        if self._broken:
            raise ProtocolError("decoder already failed on this connection")
        if not data:
            return
        if type(data) is not bytes:
            data = bytes(data)  # kept by reference below: never a buffer the caller may reuse
        src = self._src
        if self._pos >= len(src):
            if src is self._buf and src:
                self._buf = bytearray()
            self._src = data
            self._pos = 0
            return
        if src is not self._buf:
            self._buf = bytearray(memoryview(src)[self._pos :])
        elif self._pos:
            del self._buf[: self._pos]
        self._buf += data
        self._src = self._buf
        self._pos = 0

    def next(self) -> RemotingCommand | None:
        """The next whole command, or None until more bytes arrive.

        Every malformed input, whatever went wrong inside, surfaces as one
        :class:`ProtocolError`, after which the decoder refuses all input.
        """
        if self._broken:
            raise ProtocolError("decoder already failed on this connection")
        src = self._src
        pos = self._pos
        available = len(src) - pos
        if available < self._need:
            self._keep_tail()
            return None
        try:
            length = _U32.unpack_from(src, pos)[0]
            if length + 4 > self.max_frame_length:
                raise ProtocolError(f"frame length {length + 4} {OVERSIZE_FRAME} of {self.max_frame_length} bytes")
            if length < 4:
                raise ProtocolError(f"frame length {length} is too short for a header")
            if available - 4 < length:
                self._need = length + 4
                self._keep_tail()
                return None
            cmd = _decode_frame_payload(src, pos + 4, length)
        except ProtocolError:
            self._fail()
            raise
        except Exception as exc:  # e.g. a RecursionError or TypeError deep inside a parser
            self._fail()
            raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {clip(exc)}") from None
        self._pos = pos + 4 + length
        self._need = 4
        return cmd

    def feed(self, data: bytes | bytearray) -> list[RemotingCommand]:
        """Add received bytes; return every command they complete."""
        self.push(data)
        out: list[RemotingCommand] = []
        while (cmd := self.next()) is not None:
            out.append(cmd)
        return out

    def clear(self) -> None:
        """Drop everything buffered (the connection is gone): frees its memory at once."""
        self._buf = bytearray()
        self._src = self._buf
        self._pos = 0
        self._need = 4

    def _keep_tail(self) -> None:
        """Own the undecoded tail, so the caller's chunk (maybe 256 KiB) is not kept for a few bytes."""
        src = self._src
        pos = self._pos
        if pos >= len(src):
            if src is self._buf and src:
                self._buf = bytearray()  # give a big frame's buffer back
            self._src = self._buf
            self._pos = 0
        elif src is not self._buf:
            self._buf = bytearray(memoryview(src)[pos:])
            self._src = self._buf
            self._pos = 0
        elif pos:
            del self._buf[:pos]
            self._pos = 0

    def _fail(self) -> None:
        self._broken = True
        if self._src is not self._buf:  # never keep (or copy) the caller's chunk
            self._src = self._buf
            self._pos = 0


def decode_frame(frame: bytes) -> RemotingCommand:
    """Decode exactly one whole frame (length prefix included)."""
    if len(frame) < 8:
        raise ProtocolError("frame shorter than 8 bytes")
    length = _U32.unpack_from(frame, 0)[0]
    if length != len(frame) - 4:
        raise ProtocolError(f"frame length field {length} does not match {len(frame) - 4} bytes")
    try:
        return _decode_frame_payload(frame, 4, length)
    except ProtocolError:
        raise
    except Exception as exc:
        raise ProtocolError(f"undecodable frame: {type(exc).__name__}: {clip(exc)}") from None


def _decode_frame_payload(buf: bytes | bytearray, start: int, length: int) -> RemotingCommand:
    word = _U32.unpack_from(buf, start)[0]
    header_length = word & _HEADER_LENGTH_MASK
    if header_length > length - 4:
        raise ProtocolError(f"header length {header_length} larger than its frame ({length - 4})")
    hstart = start + 4
    hend = hstart + header_length
    end = start + length
    stype = word >> 24
    if stype == 0:
        cmd = decode_json_header(buf[hstart:hend])
    elif stype == 1:
        cmd = decode_binary_header(bytes(buf[hstart:hend]))
    else:
        raise ProtocolError(f"unknown serialize type {stype}")
    if hend < end:
        cmd.body = bytes(memoryview(buf)[hend:end])  # one copy, even for a bytearray
    return cmd


def _as_int(value: Any, name: str, lo: int = _INT32_MIN, hi: int = _INT32_MAX) -> int:
    if type(value) is int:
        result = value
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            raise ProtocolError(f"header field {name!r} is not an integer: {clip(repr(value))}") from None
    else:
        raise ProtocolError(f"header field {name!r} has the wrong type: {type(value).__name__}")
    if not lo <= result <= hi:
        raise ProtocolError(f"header field {name!r} out of range: {clip(result)}")
    return result


def _field_text(value: Any) -> str | None:
    """One extFields value as the text Java's typed headers would parse.

    Only scalars: Java's headers are flat string maps, and an object or
    array (possibly nested hundreds deep) is a protocol error, not
    something to re-serialise.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return None
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise ProtocolError(f"extFields value of type {type(value).__name__} (only strings, numbers, booleans, null)")


def decode_json_header(header: bytes | bytearray) -> RemotingCommand:
    """Parse a JSON header the way fastjson would, within our own type rules.

    Written for speed: it runs once per request on the NameServer's hot
    path, so the common case (int fields, string extFields, "JAVA") takes
    the fewest Python operations and everything else the careful path.
    """
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError(f"invalid JSON header: {exc}") from None
    if type(obj) is not dict:
        raise ProtocolError("JSON header is not an object")
    get = obj.get
    code = get("code", 0)
    opaque = get("opaque", 0)
    flag = get("flag", 0)
    version = get("version", 0)
    if not (type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int):
        code = _as_int(code, "code")
        opaque = _as_int(opaque, "opaque")
        flag = _as_int(flag, "flag")
        version = _as_int(version, "version")
    elif not (
        _INT32_MIN <= code <= _INT32_MAX
        and _INT32_MIN <= opaque <= _INT32_MAX
        and _INT32_MIN <= flag <= _INT32_MAX
        and _INT32_MIN <= version <= _INT32_MAX
    ):
        raise ProtocolError("header integer out of range")
    lang_value = get("language", "JAVA")
    if lang_value == "JAVA":
        language: LanguageCode | None = LanguageCode.JAVA
    elif isinstance(lang_value, str):
        language = LANGUAGE_BY_NAME.get(lang_value)
    elif type(lang_value) is int:
        language = LanguageCode(lang_value) if 0 <= lang_value < len(LanguageCode) else None
    elif lang_value is None:
        language = None
    else:
        raise ProtocolError("header field 'language' has the wrong type")
    remark = get("remark")
    if remark is not None and type(remark) is not str:
        raise ProtocolError("header field 'remark' has the wrong type")
    ext = get("extFields")
    if ext is not None:
        if type(ext) is not dict:
            raise ProtocolError("header field 'extFields' is not an object")
        for value in ext.values():
            if type(value) is not str:  # e.g. C++ clients send numbers: normalise all
                ext = {k: t for k, v in ext.items() if (t := _field_text(v)) is not None}
                break
    return RemotingCommand(code, opaque, flag, language, version, remark, ext, b"", _JSON)


_JSON = SerializeType.JSON


def _read_string(header: bytes, pos: int, size: int) -> tuple[str | None, int]:
    end = pos + size
    if size > len(header) or end > len(header):
        raise ProtocolError("binary header string runs past the header")
    if size == 0:
        return None, pos
    try:
        return header[pos:end].decode("utf-8"), end
    except UnicodeDecodeError:
        raise ProtocolError("binary header string is not UTF-8") from None


def decode_binary_header(header: bytes) -> RemotingCommand:
    """Parse a ROCKETMQ (binary) header, with Java's bounds checks."""
    hl = len(header)
    if hl < _BINARY_FIXED.size:
        raise ProtocolError("binary header too short")
    code, lang_byte, version, opaque, flag, remark_len = _BINARY_FIXED.unpack_from(header, 0)
    pos = _BINARY_FIXED.size
    if remark_len < 0:
        raise ProtocolError("negative remark length")
    remark, pos = _read_string(header, pos, remark_len)
    if pos + 4 > hl:
        raise ProtocolError("binary header has no extFields length")
    ext_len = _I32.unpack_from(header, pos)[0]
    pos += 4
    if ext_len < 0 or ext_len > hl or pos + ext_len > hl:
        raise ProtocolError("extFields length runs past the header")
    ext: dict[str, str] | None = None
    if ext_len > 0:
        ext = {}
        end = pos + ext_len
        while pos < end:
            if pos + 2 > end:
                raise ProtocolError("truncated extFields key length")
            klen = _U16.unpack_from(header, pos)[0]
            key, pos = _read_string(header, pos + 2, klen)
            if pos + 4 > end:
                raise ProtocolError("truncated extFields value length")
            vlen = _I32.unpack_from(header, pos)[0]
            if vlen < 0:
                raise ProtocolError("negative extFields value length")
            value, pos = _read_string(header, pos + 4, vlen)
            if pos > end:
                raise ProtocolError("extFields entry runs past its section")
            if key is not None and value is not None:
                ext[key] = value
    language = LanguageCode(lang_byte) if 0 <= lang_byte < len(LanguageCode) else None
    return RemotingCommand(
        code,
        opaque=opaque,
        flag=flag,
        language=language,
        version=version,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


# --------------------------------------------------------------------------
# encoding


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The header as Java's fastjson writes it: alphabetical keys, nulls omitted."""
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = cmd.language.name if cmd.language is not None else "JAVA"
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    return orjson.dumps(header)


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """The ROCKETMQ header; codes and versions must fit in 16 bits."""
    if not (-32768 <= cmd.code <= 32767 and -32768 <= cmd.version <= 32767):
        raise ValueError("code and version must fit in 16 bits for a ROCKETMQ header")
    remark = cmd.remark.encode() if cmd.remark else b""
    parts = [
        _BINARY_FIXED.pack(
            cmd.code,
            int(cmd.language) if cmd.language is not None else 0,
            cmd.version,
            cmd.opaque,
            cmd.flag,
            len(remark),
        ),
        remark,
    ]
    entries = bytearray()
    for key, value in (cmd.ext_fields or {}).items():
        if not key or value is None:
            continue
        kb = key.encode()
        vb = value.encode()
        entries += _U16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb
    parts.append(_I32.pack(len(entries)))
    parts.append(bytes(entries))
    return b"".join(parts)


def encode(cmd: RemotingCommand) -> bytes:
    """One whole frame for ``cmd``, in its own serialization."""
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        header = encode_binary_header(cmd)
        word = (1 << 24) | len(header)
    else:
        header = encode_json_header(cmd)
        word = len(header)
    body = cmd.body or b""
    return _FRAME_PREFIX.pack(4 + len(header) + len(body), word) + header + body


# Route answers are the NameServer's hot path: a JSON success response with
# no remark and no extFields differs between requests only in its opaque.
_SUCCESS_JSON_HEADER = (
    b'{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON","version":'
    + str(RemotingCommand(0).version).encode()
    + b"}"
)


def encode_success_json(opaque: int, body: bytes) -> bytes:
    """Same bytes as ``encode`` for a bare JSON SUCCESS response, faster."""
    header = _SUCCESS_JSON_HEADER % opaque
    return _FRAME_PREFIX.pack(4 + len(header) + len(body), len(header)) + header + body
