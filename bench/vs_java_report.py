"""The summary and Markdown table of ``bench/namesrv_vs_java.py``: medians of the rounds and ratios per round.

A ratio is taken within each round (ours against Java measured a minute apart), then the median of
those ratios is shown with the per-round values, so a round in which the machine was busier for both
does not move it.
"""

from __future__ import annotations

import statistics
from typing import Any

SERVERS = ("java", "ours")
#: Issue 31's targets: q/s ratio at these connection counts, both loads.
TARGET_RATIO = {1: 1.3, 16: 2.0, 64: 2.0}


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _phases(results: dict[str, Any], server: str, load: str, conns: int) -> list[dict[str, Any]]:
    return [p for r in results["rounds"] for p in r[server]["phases"] if p["load"] == load and p["connections"] == conns]


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """Per load and connection count: each server's medians over the rounds, and the per-round ratios."""
    rows = []
    for load in results["loads"]:
        for conns in results["connections"]:
            row: dict[str, Any] = {"load": load, "connections": conns}
            per = {s: _phases(results, s, load, conns) for s in SERVERS}
            for server, phases in per.items():
                row[server] = {
                    "qps": _median([p["qps"] for p in phases]),
                    "p50_ms": _median([p["p50_ms"] for p in phases]),
                    "p99_ms": _median([p["p99_ms"] for p in phases]),
                    "max_ms": max((p["max_ms"] for p in phases), default=float("nan")),
                    "cpu_pct": _median([p["server_cpu_pct"] for p in phases]),
                    "cpu_us_per_query": _median([p["server_cpu_us_per_query"] for p in phases]),
                    "sys_share": _median([p.get("server_sys_share", float("nan")) for p in phases]),
                    "errors": sum(p["errors"] for p in phases),
                }
                if load == "churn":
                    row[server].update(
                        reg_p50_ms=_median([p.get("reg_p50_ms", 0.0) for p in phases]),
                        reg_p99_ms=_median([p.get("reg_p99_ms", 0.0) for p in phases]),
                        reg_per_s=_median([p.get("registrations_per_s", 0.0) for p in phases]),
                    )
            pairs = list(zip(per["ours"], per["java"]))
            row["qps_ratio_per_round"] = [o["qps"] / j["qps"] if j["qps"] else float("inf") for o, j in pairs]
            row["qps_ratio"] = _median(row["qps_ratio_per_round"])
            row["p99_ratio_per_round"] = [o["p99_ms"] / j["p99_ms"] if j["p99_ms"] else float("inf") for o, j in pairs]
            row["p99_ratio"] = _median(row["p99_ratio_per_round"])
            rows.append(row)
    return {"loads": rows, "registration": _registration(results)}


def _registration(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for server in SERVERS:
        probes = [ms for r in results["rounds"] for ms in r[server]["probe_first_ms"]]
        creating = [r[server]["probe_first_ms"][0] for r in results["rounds"] if r[server]["probe_first_ms"]]
        cold = results["servers"][server]["cold_first_ms"]
        out[server] = {
            "first_p50_ms": _pct(probes, 50), "first_max_ms": max(probes, default=float("nan")),
            "first_creating_p50_ms": _median(creating), "first_samples": len(probes),
            "cold_first_p50_ms": _pct(cold, 50), "cold_first_max_ms": max(cold, default=float("nan")),
            "rss_mb": results["rounds"][-1][server]["rss_mb"] if results["rounds"] else float("nan"),
        }
    pairs = [(r["ours"]["probe_first_ms"], r["java"]["probe_first_ms"]) for r in results["rounds"]]
    out["first_p50_ratio_per_round"] = [_pct(o, 50) / _pct(j, 50) for o, j in pairs if o and j]
    out["rss_ratio"] = out["ours"]["rss_mb"] / out["java"]["rss_mb"] if out["java"]["rss_mb"] else float("nan")
    return out


def _f(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def markdown(results: dict[str, Any]) -> str:
    """The tables for BENCHMARKS.md: throughput and latency per load, then registrations and memory."""
    s = results["summary"]
    java = f"Java {results['java_version']}"
    churn = results["churn"]
    shape = results["shape"]
    lines = [
        f"Machine: {results['machine']}; load average {results['load_average_before']:.1f} before, "
        f"{results['load_average_after']:.1f} after; {'servers pinned to CPU 0, load generator to CPU 1' if results['pinned'] else 'not pinned (one CPU)'}.",
        f"Command: `{results['command']}`",
        f"Shape: {shape['clusters']} clusters x {shape['brokers_per_cluster']} brokers, {shape['topics_per_cluster']:,} "
        f"topics per cluster; {len(results['rounds'])} round(s) of {results['duration_s']:g} s per phase; churn: every broker "
        f"re-registering every {churn['period_s']:g} s ({churn['mode']}). {results['started']} - {results['finished']}.",
        "",
        f"| load | conns | {java} q/s | ours q/s | ratio (rounds) | {java} p50 / p99 ms | ours p50 / p99 ms | "
        f"p99 ours/Java | longest query {java} / ours ms | server CPU {java} / ours (µs per query) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in s["loads"]:
        j, o = row["java"], row["ours"]
        per = " ".join(f"{x:.2f}" for x in row["qps_ratio_per_round"])
        mark = " **short**" if row["qps_ratio"] < TARGET_RATIO.get(row["connections"], 0) else ""
        errors = f" (errors: {j['errors']} / {o['errors']})" if j["errors"] or o["errors"] else ""
        lines.append(
            f"| {'no churn' if row['load'] == 'none' else 'churn'} | {row['connections']} | {_f(j['qps'], 0)} | "
            f"{_f(o['qps'], 0)} | **{row['qps_ratio']:.2f}x**{mark} ({per}) | {j['p50_ms']:.3f} / {j['p99_ms']:.3f} | "
            f"{o['p50_ms']:.3f} / {o['p99_ms']:.3f} | {row['p99_ratio']:.2f} | {_f(j['max_ms'])} / {_f(o['max_ms'])} | "
            f"{j['cpu_pct']:.0f}% / {o['cpu_pct']:.0f}% ({j['cpu_us_per_query']:.0f} / {o['cpu_us_per_query']:.0f}){errors} |"
        )
    reg = s["registration"]
    j, o = reg["java"], reg["ours"]
    per = " ".join(f"{x:.2f}" for x in reg["first_p50_ratio_per_round"])
    lines += [
        "",
        f"| registration, as the broker sees it | {java} | ours | ours / Java |",
        "|---|---|---|---|",
        f"| first registration of a {shape['topics_per_cluster']:,}-topic broker, p50 of {o['first_samples']} (max) | "
        f"{_f(j['first_p50_ms'])} ms ({_f(j['first_max_ms'])}) | {_f(o['first_p50_ms'])} ms ({_f(o['first_max_ms'])}) | "
        f"{_f(o['first_p50_ms'] / j['first_p50_ms'], 2)} (rounds: {per}) |",
        f"| the same, the broker creating its cluster's topics, p50 | {_f(j['first_creating_p50_ms'])} ms | "
        f"{_f(o['first_creating_p50_ms'])} ms | {_f(o['first_creating_p50_ms'] / j['first_creating_p50_ms'], 2)} |",
        f"| the {len(results['servers']['ours']['cold_first_ms'])} brokers' first registrations on a fresh server, p50 (max) | "
        f"{_f(j['cold_first_p50_ms'])} ms ({_f(j['cold_first_max_ms'])}) | {_f(o['cold_first_p50_ms'])} ms "
        f"({_f(o['cold_first_max_ms'])}) | {_f(o['cold_first_p50_ms'] / j['cold_first_p50_ms'], 2)} |",
    ]
    for row in s["loads"]:
        if row["load"] == "churn":
            jr, orr = row["java"], row["ours"]
            lines.append(
                f"| under churn at {row['connections']} conns: p50 / p99 (registrations/s) | {_f(jr['reg_p50_ms'])} / "
                f"{_f(jr['reg_p99_ms'])} ms ({jr['reg_per_s']:.1f}) | {_f(orr['reg_p50_ms'])} / {_f(orr['reg_p99_ms'])} ms "
                f"({orr['reg_per_s']:.1f}) | {_f(orr['reg_p99_ms'] / jr['reg_p99_ms'], 2) if jr['reg_p99_ms'] else '-'} (p99) |"
            )
    lines.append(f"| RSS after the last round | {_f(j['rss_mb'], 0)} MB | {_f(o['rss_mb'], 0)} MB | {reg['rss_ratio']:.3f} |")
    return "\n".join(lines) + "\n"
