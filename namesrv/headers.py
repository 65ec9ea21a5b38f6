"""Reading typed header fields (extFields) of NameServer requests.

Java decodes a request's extFields into a typed header object before any
handler runs, so a bad number is refused up front (SYSTEM_ERROR, with the
NumberFormatException's text). These helpers do the same job lazily, per
field, with Java's ranges: ``long`` fields (ids, offsets, timeouts) must fit
64 bits and ``int`` fields 32, so an out-of-range value never reaches a
table or an encoder.
"""

from __future__ import annotations

from collections.abc import Mapping

from namesrv.route_model import Registration
from remoting.command import RemotingCommand
from remoting.javatypes import JavaRangeError, parse_int


class BadHeader(Exception):
    """A header parameter with the wrong type; answered with SYSTEM_ERROR."""


def number(req: RemotingCommand, key: str, bits: int = 64) -> int | None:
    """A numeric header field as Java's ``long`` (or ``int``), None when absent."""
    text = req.ext(key)
    if text is None:
        return None
    try:
        return parse_int(text, bits, key)
    except JavaRangeError as exc:
        raise BadHeader(str(exc)) from None


def check_numbers(req: RemotingCommand, fields: Mapping[str, int]) -> None:
    """Range-check every present field of ``fields`` (name -> 32 or 64 bits)."""
    for key, bits in fields.items():
        number(req, key, bits)


def flag(req: RemotingCommand, key: str) -> bool | None:
    """Java's Boolean.parseBoolean, or None when the key is absent."""
    text = req.ext(key)
    return None if text is None else text.strip().lower() == "true"


def required(req: RemotingCommand, *keys: str) -> list[str]:
    values = [req.ext(k) for k in keys]
    missing = [k for k, v in zip(keys, values, strict=True) if not v]
    if missing:
        raise BadHeader(f"missing header field(s): {', '.join(missing)}")
    return values  # type: ignore[return-value]


#: The numeric fields of each request's Java header class (5.3.3).
BROKER_ID = {"brokerId": 64}
REGISTER_BROKER_NUMBERS = {"brokerId": 64, "heartbeatTimeoutMillis": 64, "bodyCrc32": 32}
BROKER_HEARTBEAT_NUMBERS = {
    "brokerId": 64,
    "epoch": 32,
    "maxOffset": 64,
    "confirmOffset": 64,
    "heartbeatTimeoutMills": 64,
    "electionPriority": 32,
}


def registration(req: RemotingCommand) -> tuple[Registration, bool, int]:
    """REGISTER_BROKER's header: (the registration, whether the body is compressed, its CRC or 0)."""
    name, addr, cluster = required(req, "brokerName", "brokerAddr", "clusterName")
    check_numbers(req, REGISTER_BROKER_NUMBERS)
    broker_id = number(req, "brokerId")
    if broker_id is None:
        raise BadHeader("missing header field(s): brokerId")
    reg = Registration(
        cluster=cluster,
        addr=addr,
        name=name,
        broker_id=broker_id,
        ha_server_addr=req.ext("haServerAddr"),
        zone_name=req.ext("__ZONE_NAME"),
        heartbeat_timeout_ms=number(req, "heartbeatTimeoutMillis"),
        enable_acting_master=flag(req, "enableActingMaster"),
    )
    return reg, bool(flag(req, "compressed")), number(req, "bodyCrc32") or 0
