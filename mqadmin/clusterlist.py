"""``clusterList``: rows of Apache 5.x's table, computed from each broker's runtime info.

Pure functions (no I/O): the CLI fetches the ClusterInfo and the runtime
KVTables, these turn them into the documented JSON rows and the table cells.
Apache prints a stack trace for a broker that does not answer; here its
row says so in ``#Status`` and its stats are ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.text import Text

from mqadmin.client import PerServer
from mqadmin.render import Col
from remoting.bodies import ClusterInfo

#: Apache 5.x's columns (ClusterListSubCommand.printClusterBaseInfo) plus #Status.
BASE_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#Version", 3),
    Col("#InTPS(LOAD)", 1, "right"), Col("#OutTPS(LOAD)", 2, "right"), Col("#Timer(Progress)", 7),
    Col("#PCWait(ms)", 6, "right"), Col("#Hour", 4), Col("#SPACE", 5), Col("#ACTIVATED", 3), Col("#Status", wrap=True),
]
#: Drop rank of #Timer(Progress): the one column given up before the (LOAD) details are.
TIMER_RANK = 7
#: The same figures without the thread-pool load, tried when the full table is too wide.
COMPACT_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#Version", 3),
    Col("#InTPS", 1, "right"), Col("#OutTPS", 2, "right"), Col("#PCWait(ms)", 6, "right"), Col("#Hour", 4),
    Col("#SPACE", 5), Col("#ACTIVATED", 3), Col("#Status", wrap=True),
]
MORE_COLUMNS = [
    Col("#Cluster Name"), Col("#Broker Name"), Col("#BID"), Col("#Addr"), Col("#InTotalYest", 1, "right"),
    Col("#OutTotalYest", 1, "right"), Col("#InTotalToday", 1, "right"), Col("#OutTotalToday", 1, "right"),
    Col("#Status", wrap=True),
]


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
    base: dict[str, Any] = {"cluster": cluster, "brokerName": name, "brokerId": bid, "addr": addr,
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
        # Java counts hours from epoch 0 when the store is empty (0 or -1); 0.0 says "nothing stored" better.
        "hours": round((now_ms - earliest) / 3_600_000, 2) if earliest is not None and earliest > 0 else 0.0,
        "space": _num(kv, "commitLogDiskRatio", float),
        "activated": (kv["brokerActive"].strip().lower() == "true") if "brokerActive" in kv else None,
        "inTotalYest": diff(put_m, put_y),
        "outTotalYest": diff(get_m, get_y),
        "inTotalToday": diff(put_n, put_m),
        "outTotalToday": diff(get_n, get_m),
    }


def _s(value: Any, default: str = "N") -> str:
    return default if value is None else str(value)


def _f(value: float | None, fmt: str) -> str:
    return format(value or 0.0, fmt)


def status(r: dict[str, Any]) -> Text:
    text = Text("OK", style="green") if r["reachable"] else Text(f"no answer: {r['error']}", style="red")
    if r.get("provisionalOn"):
        text.append(f"; restored on {', '.join(r['provisionalOn'])}, not registered since", style="yellow")
    return text


def base_cells(r: dict[str, Any]) -> list[str | Text]:
    """Apache 5.x's cells (same formats, leading padding dropped) plus the status."""
    ident: list[str | Text] = [r["cluster"], r["brokerName"], str(r["brokerId"]), r["addr"]]
    if not r["reachable"]:
        return ident + ["-"] * 8 + [status(r)]
    congest = (r["timerCongestNum"] or 0) / 10000.0
    return ident + [
        _s(r["version"], ""),
        f"{_f(r['inTps'], '.2f')}({_s(r['sendQueue'])},{_s(r['sendWaitMs'])}ms)",
        f"{_f(r['outTps'], '.2f')}({_s(r['pullQueue'])},{_s(r['pullWaitMs'])}ms|{_s(r['ackQueue'])},{_s(r['ackWaitMs'])}ms)",
        (f"{r['timerReadBehind'] or 0}-{r['timerOffsetBehind'] or 0}({congest:.1f}w, "
         f"{_f(r['timerEnqueueTps'], '.1f')}, {_f(r['timerDequeueTps'], '.1f')})"),
        _s(r["pageCacheLockTimeMs"], ""),
        _f(r["hours"], ".2f"),
        _f(r["space"], ".4f"),
        "" if r["activated"] is None else str(r["activated"]).lower(),
        status(r),
    ]


def compact_cells(r: dict[str, Any]) -> list[str | Text]:
    cells = base_cells(r)
    if not r["reachable"]:
        return cells[:4] + ["-"] * 7 + [cells[-1]]
    return cells[:5] + [_f(r["inTps"], ".2f"), _f(r["outTps"], ".2f")] + cells[8:]


def more_cells(r: dict[str, Any]) -> list[str | Text]:
    ident: list[str | Text] = [r["cluster"], r["brokerName"], str(r["brokerId"]), r["addr"]]
    if not r["reachable"]:
        return ident + ["-"] * 4 + [status(r)]
    return ident + [str(r[k] or 0) for k in ("inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday")] + [status(r)]
