"""``clusterList``'s rows: Apache 5.x's figures, computed from each broker's runtime info.

The NameServer's ClusterInfo names the brokers; each broker's runtime KVTable
(GET_BROKER_RUNTIME_INFO) gives its figures; :func:`row` turns one answer into
the documented ``clusterList --json`` row. Apache prints a stack trace for a
broker that does not answer; here its row says so (``reachable``, ``error``).
The table cells are drawn from these rows in :mod:`mqadmin.commands.cluster`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mqadmin.client import AdminClient
from mqadmin.client.errors import AdminError, PerServer
from mqadmin.client.snapshot import provisional_by
from remoting.bodies import ClusterInfo


async def cluster_rows(client: AdminClient, only: str | None) -> list[dict[str, Any]]:
    """Every broker of every cluster (or of ``only``), with its runtime figures, as ``clusterList --json`` rows."""
    info = await client.cluster_info()
    try:
        brokers = broker_addrs(info, only)
    except LookupError as exc:
        raise AdminError(str(exc)) from None
    answers = await client.runtime_infos([b[3] for b in brokers])
    provisional = provisional_by(await client.restored_brokers_everywhere())
    now_ms = int(time.time() * 1000)
    return [row(*b, answer, now_ms, provisional.get((b[1], b[2], b[3]), []))
            for b, answer in zip(brokers, answers)]


def broker_addrs(info: ClusterInfo, only: str | None) -> list[tuple[str, str, int, str]]:
    """(cluster, brokerName, brokerId, addr) in Apache's order: clusters, then broker names sorted, then ids."""
    if only is not None and only not in info.cluster_addr_table:
        known = ", ".join(sorted(info.cluster_addr_table)) or "none"
        raise LookupError(f"cluster {only} is not known to the NameServer (clusters: {known})")
    out = []
    for cluster in sorted(info.cluster_addr_table):
        if only is not None and cluster != only:
            continue
        for name in sorted(set(info.cluster_addr_table[cluster])):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                out.append((cluster, name, bid, addr))
    return out


def vip_addr(addr: str, kv: Mapping[str, str]) -> str | None:
    """The broker's VIP address, ``listenPort - 2``: a Java broker always opens it; the stub says in its
    runtime info (``vipChannelEnabled``) whether it does. None when it does not, or ``addr`` has no port."""
    host, _, port = addr.rpartition(":")
    if kv.get("vipChannelEnabled", "true").strip().lower() != "true" or not port.isdigit():
        return None
    return f"{host}:{max(int(port) - 2, 0)}"


def _num(kv: Mapping[str, str], key: str, kind: type = int) -> Any:
    """A number from the KVTable (first of a space-separated list), or None."""
    text = (kv.get(key) or "").strip().split(" ")[0]
    try:
        return kind(text)
    except ValueError:
        return None


def row(cluster: str, name: str, bid: int, addr: str, answer: PerServer, now_ms: int,
        provisional_on: list[str] | None = None) -> dict[str, Any]:
    """The documented ``clusterList --json`` row.

    ``provisional_on``: the NameServers that restored this broker from their
    route snapshot and have not heard it register since (code 9002).
    """
    base: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr, "vipAddr": None,
                            "reachable": answer.ok, "error": None, "provisional": bool(provisional_on),
                            "provisionalOn": list(provisional_on or [])}
    keys = ["version", "inTps", "outTps", "sendQueue", "sendWaitMs", "pullQueue", "pullWaitMs", "ackQueue",
            "ackWaitMs", "timerReadBehind", "timerOffsetBehind", "timerCongestNum", "timerEnqueueTps",
            "timerDequeueTps", "pageCacheLockTimeMs", "hours", "space", "activated", "inTotalYest",
            "outTotalYest", "inTotalToday", "outTotalToday"]
    if not answer.ok:
        base["error"] = (answer.error or "").split(": ", 1)[-1]
        return base | dict.fromkeys(keys)
    kv: Mapping[str, str] = answer.value
    earliest = _num(kv, "earliestMessageTimeStamp")
    put_y, put_m, put_n = (_num(kv, k) for k in ("msgPutTotalYesterdayMorning", "msgPutTotalTodayMorning", "msgPutTotalTodayNow"))
    get_y, get_m, get_n = (_num(kv, k) for k in ("msgGetTotalYesterdayMorning", "msgGetTotalTodayMorning", "msgGetTotalTodayNow"))

    def diff(a: int | None, b: int | None) -> int | None:
        return a - b if a is not None and b is not None else None

    return base | {
        "vipAddr": vip_addr(addr, kv),
        "version": kv.get("brokerVersionDesc"),
        "inTps": _num(kv, "putTps", float),
        "outTps": _num(kv, "getTransferredTps", float) if "getTransferredTps" in kv else _num(kv, "getTransferedTps", float),
        "sendQueue": _num(kv, "sendThreadPoolQueueSize"),
        "sendWaitMs": _num(kv, "sendThreadPoolQueueHeadWaitTimeMills"),
        "pullQueue": _num(kv, "pullThreadPoolQueueSize"),
        "pullWaitMs": _num(kv, "pullThreadPoolQueueHeadWaitTimeMills"),
        "ackQueue": _num(kv, "ackThreadPoolQueueSize"),
        "ackWaitMs": _num(kv, "ackThreadPoolQueueHeadWaitTimeMills"),
        "timerReadBehind": _num(kv, "timerReadBehind"),
        "timerOffsetBehind": _num(kv, "timerOffsetBehind"),
        "timerCongestNum": _num(kv, "timerCongestNum"),
        "timerEnqueueTps": _num(kv, "timerEnqueueTps", float),
        "timerDequeueTps": _num(kv, "timerDequeueTps", float),
        "pageCacheLockTimeMs": _num(kv, "pageCacheLockTimeMills"),
        # As Java (4.9.7 and 5.3.3) computes it, whatever the value: an empty store (-1) gives the hours since
        # the epoch, about 490,000, which reads as "no message", and is what Java's users see there.
        "hours": round((now_ms - earliest) / 3_600_000, 2) if earliest is not None else 0.0,
        "space": _num(kv, "commitLogDiskRatio", float),
        "activated": (kv["brokerActive"].strip().lower() == "true") if "brokerActive" in kv else None,
        "inTotalYest": diff(put_m, put_y),
        "outTotalYest": diff(get_m, get_y),
        "inTotalToday": diff(put_n, put_m),
        "outTotalToday": diff(get_n, get_m),
    }
