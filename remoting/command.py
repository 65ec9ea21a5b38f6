"""The remoting command: one request or response, independent of its encoding."""

from __future__ import annotations

from collections.abc import Mapping

from remoting.codes import (
    CURRENT_VERSION,
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    SerializeType,
)


class RemotingCommand:
    """A decoded frame.

    A plain slotted class rather than a dataclass: one is built for every
    request on the NameServer's hot path, and slots keep that cheap. The
    decoder passes arguments by position (keywords cost twice as much);
    everyone else should name them.
    ``ext_fields`` always maps strings to strings, whatever the peer sent.
    """

    __slots__ = (
        "body",
        "code",
        "ext_fields",
        "flag",
        "language",
        "opaque",
        "remark",
        "serialize_type",
        "version",
    )

    def __init__(
        self,
        code: int,
        opaque: int = 0,
        flag: int = 0,
        language: LanguageCode | None = LanguageCode.JAVA,
        version: int = CURRENT_VERSION,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        serialize_type: SerializeType = SerializeType.JSON,
    ) -> None:
        self.code = code
        self.opaque = opaque
        self.flag = flag
        self.language = language
        self.version = version
        self.remark = remark
        self.ext_fields = ext_fields
        self.body = body
        self.serialize_type = serialize_type

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def ext(self, key: str, default: str | None = None) -> str | None:
        """One named header parameter, or ``default`` when absent."""
        fields = self.ext_fields
        if fields is None:
            return default
        return fields.get(key, default)

    def __repr__(self) -> str:
        kind = "response" if self.is_response else "request"
        return (
            f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"remark={self.remark!r} ext={self.ext_fields!r} body={len(self.body)}B "
            f"{self.serialize_type.name})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RemotingCommand):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)


def request(
    code: int,
    ext_fields: Mapping[str, object] | None = None,
    body: bytes = b"",
    *,
    opaque: int = 0,
    oneway: bool = False,
    version: int = CURRENT_VERSION,
    language: LanguageCode = LanguageCode.JAVA,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """Build a request, turning header values into the strings Java sends."""
    return RemotingCommand(
        int(code),
        opaque=opaque,
        flag=FLAG_ONEWAY if oneway else 0,
        language=language,
        version=version,
        ext_fields=stringify_fields(ext_fields) if ext_fields is not None else None,
        body=body,
        serialize_type=serialize_type,
    )


def response_to(
    req: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext_fields: Mapping[str, object] | None = None,
    body: bytes = b"",
) -> RemotingCommand:
    """A response matching ``req``: same opaque, same serialization."""
    return RemotingCommand(
        int(code),
        opaque=req.opaque,
        flag=FLAG_RESPONSE,
        remark=remark,
        ext_fields=stringify_fields(ext_fields) if ext_fields is not None else None,
        body=body,
        serialize_type=req.serialize_type,
    )


def stringify_fields(fields: Mapping[str, object]) -> dict[str, str]:
    """Header values as Java writes them: decimal text, ``true``/``false``."""
    out: dict[str, str] = {}
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = value if isinstance(value, str) else str(value)
    return out
