"""Option checks shared by the broker admin commands: each bad value is a usage error (exit 2) naming it."""

from __future__ import annotations

import datetime
import time

from mqadmin.cliutil import bad_option
from remoting.transport import parse_addr


def addr_opt(option: str, value: str) -> str:
    """A ``host:port`` option value."""
    try:
        parse_addr(value)
    except ValueError as exc:
        raise bad_option(option, str(exc)) from None
    return value.strip()


def one_target(broker_addr: str | None, cluster: str | None) -> None:
    """Apache's ``-b brokerAddr | -c clusterName`` pair: exactly one (Java prints its help otherwise)."""
    if (broker_addr is None) == (cluster is None):
        raise bad_option("-b/-c", "give exactly one of -b brokerAddr or -c clusterName")


def bool_opt(option: str, value: str | None) -> bool | None:
    """Java's ``Boolean.parseBoolean`` options, but a value that is neither true nor false is refused."""
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise bad_option(option, f"{value!r} is not true or false")
    return text == "true"


def time_opt(option: str, text: str) -> int:
    """``now``, milliseconds since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS`` (Apache's forms)."""
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise bad_option(option, f"{text!r} is not now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp() * 1000)
