"""A fan-out result as JSON, as Rich tables, and as a PNG (``--plot``).

Everything is derived from the merged counters and the brokers' own
counts; the JSON document is the source the tables and the plot are drawn
from, so ``--report`` files can be re-plotted later. Percentiles come from
5 % log buckets (see :mod:`simclient.stats`).
"""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.text import Text

from mqadmin.fanout import consume_report
from mqadmin.fanout.metrics import (
    BROKER_TIMELINE_FIELDS,
    TIMELINE_FIELDS,
    FanoutMetrics,
)
from mqadmin.fanout.runner import FanoutResult
from mqadmin.output.jsonkeys import camel
from mqadmin.output.tables import Col, fit_table
from simclient.stats import Histogram

#: A broker counts as "still in use at the end" if it was tried this close to the end of the load (s).
STILL_USED = 2.0


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def _hist(h: Histogram) -> dict[str, float]:
    return {"count": h.count, "mean": round(h.mean_ms, 3), "p50": round(h.percentile(50), 3),
            "p99": round(h.percentile(99), 3), "max": round(h.max_ms, 3)}


def _series(timeline: dict[int, list[int]], fields: tuple[str, ...], last: int) -> dict[str, list[int]]:
    return {name: [timeline.get(s, [0] * len(fields))[i] for s in range(last + 1)] for i, name in enumerate(fields)}


def _seconds_key(name: str) -> str:
    """A timing's JSON key: ``cluster_start_s`` -> ``clusterStartSeconds`` (camelCase, as every JSON key)."""
    return camel(name.removesuffix("_s")) + "Seconds"


def _words(key: str) -> str:
    """``clusterStart`` -> ``cluster start``."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: " " + m.group(1).lower(), key)


def load_window(result: FanoutResult) -> float:
    """Seconds the producers were sending, so that "per s" is a mean of what "peak s" is the maximum of.

    With a duration: the duration once per wave of partitions (more partitions than task slots run
    one wave after another), widened to the seconds in which sends began when those are clearly
    more (a slot freed late). Without one: the longest partition's load.
    """
    if result.plan.duration is None:
        return max(result.metrics.load.elapsed, 1e-9)
    window = result.plan.duration * math.ceil(result.plan.partitions / max(1, result.parallelism))
    busy = [s for s, row in result.metrics.timeline.items() if row[0] + row[1]]
    span = float(max(busy) - min(busy) + 1) if busy else 0.0
    return span if span > window + 1.0 else window


def failover(result: FanoutResult, end: float) -> list[dict[str, Any]]:
    """For each killed broker (or, without kills, each broker with failed attempts): how the producers moved off it."""
    m = result.metrics
    rate = result.plan.rate
    still = max(STILL_USED, 2.0 / rate) if rate > 0 else STILL_USED
    rows = []
    kills = {e.broker: e.t for e in result.events if e.ok and e.broker and e.kind in (
        "kill_broker", "stop_broker", "shutdown_broker")}
    names = list(kills) or [n for n, u in m.brokers.items() if u.failed or u.refused]
    for name in names:
        use = m.brokers.get(name)
        if use is None:
            continue
        ref = kills.get(name, use.first_failure)
        last = use.last_attempt
        # Still in use: some producer still routes to it and tried it lately (with the latency
        # fault strategy a routed broker may be avoided, hence both).
        in_use = use.routing > 0 and last is not None and end - last < still
        rows.append({
            "broker": name,
            "killedAt": _r(kills.get(name)),
            "firstFailure": _r(use.first_failure),
            "failedAttempts": use.failed,
            "refusedAttempts": use.refused,
            "lastAttempt": _r(last),
            "stoppedSendingAfter": None if in_use or last is None or ref is None else _r(max(0.0, last - ref)),
            "stillSendingAtEnd": in_use,
            "producersRoutingAtEnd": use.routing,
            "lastRouted": _r(use.last_routed),
            "droppedFromRoutesAfter": None if use.routing or use.last_routed is None or ref is None
            else _r(max(0.0, use.last_routed - ref)),
        })
    return rows


def agreement(result: FanoutResult) -> dict[str, Any]:
    """Producers' successful sends vs the brokers' own counts, per broker and in total.

    A broker that answers at the end must match exactly. One that died
    during the run can only be checked against its last reading: it must
    not have counted more than the producers saw stored on it. Timed-out
    sends may have been stored all the same, so a surplus of up to that
    many is "explained" rather than a disagreement.
    """
    m = result.metrics
    timeouts = m.load.outcomes.get("timeout", 0)
    per: dict[str, Any] = {}
    total_seen = total_counted = 0
    agree = True
    for name in sorted(set(result.counts) | set(m.load.by_broker)):
        seen = m.load.by_broker.get(name, 0)
        c = result.counts.get(name)
        counted = c.delta if c is not None else None
        total_seen += seen
        if counted is None:
            agree = False
            why = c.error if c is not None and c.error else "not a master listed before the run"
            per[name] = {"producersOk": seen, "brokerCounted": None, "agree": False, "why": why}
            continue
        total_counted += counted
        entry: dict[str, Any] = {"producersOk": seen, "brokerCounted": counted}
        if c is not None and not c.reachable_at_end:
            entry["agree"] = counted <= seen
            entry["gone"] = True
            entry["why"] = "gone at the end" + (
                f"; counted by t={c.last_seen_at:.1f} s (must be <= producers ok)" if c.last_seen_at is not None else "")
        else:
            entry["agree"] = counted == seen
        agree = agree and entry["agree"]
        per[name] = entry
    diff = total_counted - total_seen
    explained = not agree and all(e["brokerCounted"] is not None for e in per.values()) and 0 <= diff <= timeouts
    # A broker gone at the end (killed: an in-memory store) was last counted before it died; the sends
    # the producers saw stored on it after that reading cannot be checked -- say so, never "agree".
    unchecked = sum(e["producersOk"] - e["brokerCounted"] for e in per.values()
                    if e.get("gone") and e["brokerCounted"] is not None and e["agree"])
    note = ""
    if not agree:
        note = f"brokers counted {diff:+d} vs the producers' stored sends"
        if timeouts:
            note += f"; {timeouts} sends timed out (a timed-out send may still be stored)"
    elif unchecked:
        gone = ", ".join(n for n, e in per.items() if e.get("gone"))
        note = (f"{unchecked:,} sends stored on {gone} after its last count cannot be checked: "
                "its messages died with it (in-memory broker)")
    return {"producersOk": total_seen, "brokersCounted": total_counted, "agree": agree, "explained": explained,
            "unchecked": unchecked, "brokers": per, "note": note}


def to_json(result: FanoutResult) -> dict[str, Any]:
    m: FanoutMetrics = result.metrics
    load = m.load
    plan = result.plan
    window = load_window(result)
    started, ended = m.started or 0.0, m.ended or 0.0
    last_sec = max([*m.timeline, *(s for u in m.brokers.values() for s in u.timeline), 0])
    route_peak = max((row[2] for row in m.timeline.values()), default=0)
    sends_peak = max((row[0] + row[1] for row in m.timeline.values()), default=0)
    parts = [p for p in m.parts if p.error is None]
    cpu = sum(p.cpu_s for p in parts)
    return {
        "engine": {"name": result.engine, "master": result.master, "parallelism": result.parallelism,
                   "partitions": plan.partitions, "text": result.engine_text},
        "load": {"producers": plan.producers, "topics": list(plan.topics), "ratePerProducer": plan.rate,
                 "duration": plan.duration, "messagesPerProducer": plan.messages_per_producer,
                 "messageSize": plan.message_size, "pollInterval": plan.poll_interval,
                 "sendTimeout": plan.send_timeout, "retries": plan.retries, "latencyFault": plan.latency_fault,
                 "rampUp": plan.ramp_up, "namesrv": list(plan.namesrv_addrs), "scenario": result.scenario},
        "window": {"started": _r(started), "ended": _r(ended), "loadSeconds": _r(window)},
        "sends": {"total": load.sends, "perSecond": round(load.sends / window, 1), "peakSecond": sends_peak,
                  "outcomes": dict(load.outcomes), "retried": load.retried, "latencyMs": _hist(load.latency),
                  "okLatencyMs": _hist(load.ok_latency)},
        "routes": {"queries": load.route.queries, "perSecond": round(load.route.queries / window, 1),
                   "peakSecond": route_peak, "failures": load.route.failures, "notFound": load.route.not_found,
                   "changes": load.route.changes, "latencyMs": _hist(load.route.latency)},
        "brokers": {name: {"stored": u.stored, "attempts": u.attempts, "failed": u.failed, "refused": u.refused,
                           "firstAttempt": _r(u.first_attempt), "lastAttempt": _r(u.last_attempt),
                           "firstFailure": _r(u.first_failure), "lastFailure": _r(u.last_failure),
                           "routingAtEnd": u.routing, "lastRouted": _r(u.last_routed), "addrs": u.addrs}
                    for name, u in sorted(m.brokers.items())},
        "agreement": agreement(result),
        "failover": failover(result, ended),
        "events": [e.to_json() for e in result.events],
        "scenarioVerdicts": result.verdicts,
        "timings": {_seconds_key(k): round(v, 3) for k, v in result.timings.items()},
        "resources": {"cpuSeconds": round(cpu, 3), "cpuMicrosPerSend": round(cpu / load.sends * 1e6, 1) if load.sends else None,
                      "maxRssMb": round(max((p.max_rss_mb for p in parts), default=0.0), 1),
                      "maxFds": max((p.max_fds for p in parts), default=0),
                      "connections": sum(p.connects - p.connect_failures for p in parts),
                      "connectFailures": sum(p.connect_failures for p in parts)},
        "partitions": [p.to_json() for p in m.parts],
        "timeline": {**_series(m.timeline, TIMELINE_FIELDS, last_sec),
                     "brokers": {name: _series(u.timeline, BROKER_TIMELINE_FIELDS, last_sec)
                                 for name, u in sorted(m.brokers.items())}},
        "consumers": consume_report.to_json(result, window),
        "notes": result.notes,
    }


# ---------------------------------------------------------------------------- text


def _ms(h: dict[str, float]) -> list[str]:
    return [f"{h['p50']:.2f}", f"{h['p99']:.2f}", f"{h['max']:.1f}"]


def _t(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(doc: dict[str, Any], console: Console | None = None) -> RenderableType:
    """The report as Rich renderables (tables and lines), from the JSON document."""
    load, sends, routes = doc["load"], doc["sends"], doc["routes"]
    head = Text(
        f"{load['producers']:,} producers × {len(load['topics'])} topics on {doc['engine']['text']} "
        f"({doc['engine']['partitions']} partitions), {doc['window']['loadSeconds']:g} s of load"
        + (f", scenario {load['scenario']}" if load["scenario"] else ""), style="bold")
    cols = [Col("#What"), Col("#Count", justify="right"), Col("#Per s", justify="right"),
            Col("#Peak s", 2, "right"), Col("#p50 ms", justify="right"), Col("#p99 ms", justify="right"),
            Col("#max ms", 1, "right")]
    rows = [
        ["sends", f"{sends['total']:,}", f"{sends['perSecond']:,.1f}", f"{sends['peakSecond']:,}", *_ms(sends["latencyMs"])],
        ["sends stored (ok)", f"{sends['outcomes'].get('ok', 0):,}", "", "", *_ms(sends["okLatencyMs"])],
    ]
    for outcome, n in sends["outcomes"].items():
        if outcome != "ok" and n:
            rows.append([Text(f"sends {outcome}", style="red"), f"{n:,}", "", "", "", "", ""])
    if sends["retried"]:
        rows.append([Text("sends retried (failover)", style="yellow"), f"{sends['retried']:,}", "", "", "", "", ""])
    rows.append(["route queries", f"{routes['queries']:,}", f"{routes['perSecond']:,.1f}", f"{routes['peakSecond']:,}",
                 *_ms(routes["latencyMs"])])
    if routes["failures"]:
        rows.append([Text("route queries unanswered", style="red"), f"{routes['failures']:,}", "", "", "", "", ""])
    if routes["changes"]:
        rows.append(["route changes seen", f"{routes['changes']:,}", "", "", "", "", ""])
    parts: list[RenderableType] = [head, fit_table(cols, rows, title="client-observed", console=console)]

    agree = doc["agreement"]
    bcols = [Col("#Broker"), Col("#Producers ok", justify="right"), Col("#Broker counted", justify="right"),
             Col("#Agree"), Col("#Attempts", 1, "right"), Col("#Failed", 1, "right"), Col("#Last used s", 2, "right"),
             Col("#Routing at end", 2, "right"), Col("#Note", 3, wrap=True)]
    brows = []
    for name, a in agree["brokers"].items():
        use = doc["brokers"].get(name, {})
        flag = a["agree"]
        brows.append([name, f"{a['producersOk']:,}", "-" if a["brokerCounted"] is None else f"{a['brokerCounted']:,}",
                      Text(("<= ok" if a.get("gone") else "yes") if flag else "NO", style="green" if flag else "red"),
                      f"{use.get('attempts', 0):,}", f"{use.get('failed', 0) + use.get('refused', 0):,}",
                      _t(use.get("lastAttempt")), f"{use.get('routingAtEnd', 0):,}", a.get("why", "")])
    if not agree["agree"]:
        verdict = Text("NO", style="red")
    elif agree.get("unchecked"):
        verdict = Text(f"{agree['unchecked']:,} unchecked", style="yellow")
    else:
        verdict = Text("yes", style="green")
    footer = [["total", f"{agree['producersOk']:,}", f"{agree['brokersCounted']:,}", verdict, "", "", "", "",
               agree["note"]]]
    parts.append(fit_table(bcols, brows, footer_rows=footer, title="brokers (counted = the brokers' own queue offsets)",
                           console=console))

    parts.extend(consume_report.render(doc.get("consumers"), console))
    if doc["failover"]:
        fcols = [Col("#Broker"), Col("#Killed at s", justify="right"), Col("#Failed attempts", justify="right"),
                 Col("#Stopped sending after s", justify="right"), Col("#Left routes after s", 1, "right"),
                 Col("#Routing at end", 2, "right")]
        frows = []
        for f in doc["failover"]:
            stop = Text("still sending at end", style="red") if f["stillSendingAtEnd"] else _t(f["stoppedSendingAfter"])
            frows.append([f["broker"], _t(f["killedAt"]), f"{f['failedAttempts'] + f['refusedAttempts']:,}", stop,
                          _t(f["droppedFromRoutesAfter"]), f"{f['producersRoutingAtEnd']:,}"])
        parts.append(fit_table(fcols, frows, title="failover (times from the kill, else from the first failure)",
                               console=console))
    for e in doc["events"]:
        parts.append(Text(f"t={e['t']:6.2f} s  {e['what']}: {'ok' if e['ok'] else 'FAILED'} ({e['detail']})",
                          style=None if e["ok"] else "red"))
    for v in doc["scenarioVerdicts"]:
        mark, style = ("PASS", "green") if v["passed"] else ("----", "yellow") if v["passed"] is None else ("FAIL", "red")
        parts.append(Text(f"{mark} {v['expectation']}: {v['measuredText']} (target {v['target']})", style=style))
    t, r = doc["timings"], doc["resources"]
    bits = [f"{_words(k.removesuffix('Seconds'))} {v:.2f} s" for k, v in t.items()]
    parts.append(Text("timings: " + ", ".join(bits), style="dim"))
    failed_dials = r.get("connectFailures", 0)
    conns = (f"{r['connections']} connections opened in {doc['engine']['partitions']} partitions"
             + (f", {failed_dials} connect attempts failed (re-dials of a broker that is gone)" if failed_dials else ""))
    parts.append(Text(f"workers: {r['cpuSeconds']:.1f} s CPU ({r['cpuMicrosPerSend'] or 0:.0f} µs per send), "
                      f"max RSS {r['maxRssMb']:.0f} MB, max fds {r['maxFds']}, {conns}", style="dim"))
    for n in doc["notes"]:
        parts.append(Text(f"note: {n}", style="yellow"))
    return Group(*parts)


# ---------------------------------------------------------------------------- plot


def plot_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def plot(doc: dict[str, Any], path: str | Path) -> None:
    """Sends (and consumptions) per second, attempts per broker, route queries per second; kills marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mqadmin.output.plotmarks import bars, draw_marks, layout, legend_outside, merge_marks, rate_pieces, stairs_of

    tl = doc["timeline"]
    n = len(tl["ok"])
    load_span, run_span = spans(doc)
    height = 9.0
    fig, (top, mid, bottom) = plt.subplots(3, 1, sharex=True, figsize=(12, height), height_ratios=(3, 2, 2))
    # second i is drawn over [i, i+1] (a kill at t=8 shows from 8, not 7.5), the load's partial first and
    # last seconds over the part the load covered, as a rate
    tops = bars(top, rate_pieces(tl["ok"], *load_span), color="#2ca02c", label="sends stored", edgecolor="white",
                linewidth=0.3)
    if any(tl["failed"]):
        bars(top, rate_pieces(tl["failed"], *load_span), tops, color="#d62728", label="sends failed",
             edgecolor="white", linewidth=0.3)
    consumers = doc.get("consumers")
    top.set_ylabel("per second: sends begun (bars),\ndeliveries (lines)" if consumers else "sends begun / s")
    consume_report.plot_line(consumers, top, run_span)
    legend_outside(top)
    load = doc["load"]
    who = f"{load['producers']:,} producers" + (
        f" and {consumers['consumers']:,} consumers in {consumers['groups']:,} group(s)" if consumers else "")
    done = f"{doc['sends']['total']:,} sends, " + (
        f"{consumers['distinct']:,} messages consumed ({consumers['redeliveries']:,} re-deliveries), " if consumers else "")
    fig.suptitle(f"{who} on {doc['engine']['text']}: {done}{doc['routes']['queries']:,} route queries",
                 fontsize="medium", x=0.1, ha="left")
    for name, series in tl["brokers"].items():
        line = mid.stairs(*stairs_of(rate_pieces(series["attempts"], *load_span)), label=f"{name} attempts",
                          linewidth=1.5)
        if any(series["failed"]):
            mid.stairs(*stairs_of(rate_pieces(series["failed"], *load_span)), label=f"{name} failed",
                       color=line.get_edgecolor(), linestyle=":", linewidth=2)
    mid.set_ylabel("send attempts / s")
    legend_outside(mid)
    bottom.stairs(*stairs_of(rate_pieces(tl["routeQueries"], *run_span)), color="#1f77b4", label="route queries",
                  linewidth=1.5)
    if any(tl["routeFailures"]):
        bottom.stairs(*stairs_of(rate_pieces(tl["routeFailures"], *run_span)), color="#d62728", label="unanswered",
                      linewidth=1.5)
    bottom.set_ylabel("route queries / s")
    bottom.set_xlabel("seconds since the start barrier")
    legend_outside(bottom)
    marks = merge_marks([(e["t"], f"{e['what']}" + ("" if e["ok"] else f": {e['detail']}"), e["ok"])
                         for e in doc["events"]])
    listed = draw_marks(fig, top, (top, mid, bottom), marks)
    bottom.set_xlim(0, max(n, run_span[1], 1))
    layout(fig, listed, height)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def spans(doc: dict[str, Any]) -> tuple[tuple[float, float], tuple[float, float]]:
    """(when producers sent, when partitions ran), in seconds since the start barrier, from the partitions:
    a second only partly inside one is drawn over that part, as a rate (see plotmarks.rate_pieces)."""
    parts = [p for p in doc.get("partitions", []) if p.get("error") is None] or [{"started": 0.0, "ended": 0.0}]
    first = min(p["started"] for p in parts)
    last_end = max(p["ended"] for p in parts)
    duration = doc["load"].get("duration")
    load_end = max(p["started"] for p in parts) + duration if duration else last_end
    return (first, load_end), (first, max(last_end, load_end))
