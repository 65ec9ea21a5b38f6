"""Issue 22, items 17-19: what the ``--plot`` figures show, checked on the figures a real CLI run draws.

Each test runs ``mqadmin scenario run`` or ``mqadmin fanout`` through the CLI's entry code in this
process (real clusters, real processes), with ``matplotlib.pyplot.close`` kept from discarding the
figure; the assertions read the artists' data (bar positions and heights, step values, line styles,
marks) and compare them with the run's own report and records, never pixels.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from mqadmin.fanout.report import spans  # noqa: E402
from mqadmin.output.plotmarks import rate_pieces, stairs_of  # noqa: E402
from simclient import read_records  # noqa: E402
from simclient.records import OUTCOMES  # noqa: E402
from tests.mqadmin_procs import cli_env, mqadmin  # noqa: E402

#: Load of 7.5 s (its last second is half a second), slow route polls (producers keep trying the dead
#: broker, so sends are retried), two consumer groups, a kill and a restart that takes a while.
SCENARIO = """\
name: plot-check
description: what the plot shows
duration: 7.5
cluster:
  namesrvs: 2
  brokers: 2
  topics: [PlotTopic]
  queues: 2
  register_period_ms: 1000
load:
  producers: 2
  rate: 20
  poll_interval: 30
consumers:
  - name: solo
    count: 1
    poll_interval: 1
  - name: pair
    count: 2
    poll_interval: 1
timeline:
  - at: 2
    kill_broker: broker-a
  - at: 4
    restart_broker: broker-a
expect:
  - max_lost: 100000
"""


@pytest.fixture
def figures(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every figure the command closes, kept for the test (and closed after it)."""
    kept: list[Any] = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    yield kept
    monkeypatch.undo()
    for fig in kept:
        plt.close(fig)


def snake_keys(value: Any, where: str = "") -> list[str]:
    """Every field name in a printed JSON document still in snake_case (item 16: camelCase everywhere).
    Keys that are data are left alone: send outcomes keep simclient's names (no_route, conn_error), and
    other data keys (Java's codes such as SEND_OK, broker names) are not lower-case words with underscores."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            if key not in OUTCOMES and isinstance(key, str) and re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", key):
                found.append(f"{where}.{key}")
            found += snake_keys(inner, f"{where}.{key}")
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += snake_keys(inner, f"{where}[{index}]")
    return found


def _bars(ax: Any, label: str) -> list[tuple[float, float, float]]:
    (container,) = [c for c in ax.containers if c.get_label() == label]
    return [(round(b.get_x(), 6), round(b.get_x() + b.get_width(), 6), round(b.get_height(), 6)) for b in container]


def _rounded(pieces: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    return [(round(a, 6), round(b, 6), round(c, 6)) for a, b, c in pieces]


def _stairs(ax: Any, label: str) -> Any:
    (patch,) = [p for p in ax.patches if type(p).__name__ == "StepPatch" and p.get_label() == label]
    return patch


def test_scenario_plot_shows_brokers_retries_groups_and_restart(tmp_path: Path, figures: list[Any]) -> None:
    path = tmp_path / "plot-check.yaml"
    path.write_text(SCENARIO)
    report, png, records = tmp_path / "r.json", tmp_path / "p.png", tmp_path / "r.msgpack"
    done = mqadmin("scenario", "run", str(path), "--report", str(report), "--plot", str(png), "--records",
                   str(records), env=cli_env(tmp_path / "state", TMPDIR=str(tmp_path)), timeout=300)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads(report.read_text())
    assert snake_keys(doc) == [] and doc["consumers"] and doc["sends"]["perSecond"]
    (fig,) = figures
    top, routes, lag = fig.axes
    sends = list(read_records(records))
    seconds = len(doc["sends"]["perSecond"])

    # 17: stored sends split by the broker that stored them, from the records, the half second at the end as a rate
    for broker in ("broker-a", "broker-b"):
        counts = Counter(min(seconds - 1, int(r.t)) for r in sends if r.outcome == "ok" and r.broker == broker)
        expected = _rounded(rate_pieces([counts.get(i, 0) for i in range(seconds)], 0.0, 7.5))
        assert _bars(top, f"ok, stored on {broker}") == expected, broker
    last = next(b for b in _bars(top, "ok, stored on broker-b") if b[0] == 7.0)
    assert last[1] == 7.5  # the load's last half second: drawn over that half only (not a whole-second collapse)
    # 17: the retries are visible, per second, as the records count them
    retried = Counter(min(seconds - 1, int(r.t)) for r in sends if r.attempts > 1)
    assert sum(retried.values()) > 0  # producers polled every 30 s: they kept trying broker-a after the kill
    values, edges = stairs_of(rate_pieces([retried.get(i, 0) for i in range(seconds)], 0.0, 7.5))
    step = _stairs(top, "retried (another attempt)")
    assert list(step.get_data().values) == pytest.approx(values) and list(step.get_data().edges) == pytest.approx(edges)
    # 17: each NameServer's line on its true values (no offset), told apart by its dashes
    lines = [ln for ln in routes.get_lines() if ln.get_label().startswith("namesrv-")]
    assert [ln.get_label() for ln in lines] == ["namesrv-0", "namesrv-1"]
    assert all(float(y) in (-0.5, 0.0, 1.0, 2.0) for ln in lines for y in ln.get_ydata())
    assert lines[0].get_linestyle() != lines[1].get_linestyle() and lines[0].get_linewidth() > lines[1].get_linewidth()

    # 18: marks where the actions began; the restart shaded until broker-a was up again
    kill, restart = doc["actions"]
    marks = {t.get_text(): t.xy[0] for t in top.texts}
    assert marks == {"1": pytest.approx(kill["start"], abs=1e-3), "2": pytest.approx(restart["start"], abs=1e-3)}
    assert restart["end"] - restart["start"] > 0.3  # a restart takes a while: where it began is not where it ended
    shades = [p for p in routes.patches if type(p).__name__ in ("Rectangle", "Polygon")]
    spans_x = [(p.get_x(), p.get_x() + p.get_width()) if hasattr(p, "get_width")
               else (min(p.get_xy()[:, 0]), max(p.get_xy()[:, 0])) for p in shades]
    assert any(abs(lo - restart["start"]) < 1e-3 and abs(hi - restart["end"]) < 1e-3 for lo, hi in spans_x), spans_x
    listing = next(t.get_text() for t in fig.texts if "restart_broker" in t.get_text())
    assert f"restart_broker broker-a-0 (up again at t={restart['end']:.2f} s)" in listing
    # 18: one consumption line per group (every group reads every message: a sum would read as duplicates)
    group_lines = {g: _stairs(top, f"consumed by {g}") for g in ("solo", "pair")}
    total = stairs_of(rate_pieces(doc["consumers"]["perSecond"], 0.0, doc["end"]))[0]
    summed = [a + b for a, b in zip(*(s.get_data().values for s in group_lines.values()))]
    assert summed == pytest.approx(total) and all(list(s.get_data().values) != pytest.approx(total)
                                                  for s in group_lines.values())
    # 18: the two lag lines are told apart where they coincide
    lags = {ln.get_label(): ln for ln in lag.get_lines() if ln.get_label().startswith("lag ")}
    assert set(lags) == {"lag solo", "lag pair"}
    assert (lags["lag solo"].get_linestyle(), lags["lag solo"].get_linewidth()) != (
        lags["lag pair"].get_linestyle(), lags["lag pair"].get_linewidth())
    # 18: the text strip's max lag is the phase table's
    for group in ("solo", "pair"):
        phase_max = max(p["maxLag"][group] for p in doc["consumers"]["phases"])
        assert max(doc["consumers"]["lagPerSecond"][group]) == phase_max
        strip = next(line for line in done.stdout.splitlines() if line.strip().startswith(f"lag {group}"))
        assert re.search(rf"\| max {phase_max}$", strip), (strip, phase_max)


def test_fanout_plot_names_consumption_and_draws_partial_seconds_as_rates(tmp_path: Path, figures: list[Any]) -> None:
    report, png = tmp_path / "r.json", tmp_path / "p.png"
    done = mqadmin("fanout", "--start", "--no-spark", "--workers", "1", "--producers", "6", "--rate", "10",
                   "--duration", "2.5", "--consumers", "2", "--consumer-groups", "1", "--drain", "2",
                   "--report", str(report), "--plot", str(png), env=cli_env(tmp_path / "state", TMPDIR=str(tmp_path)),
                   timeout=300)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    doc = json.loads(report.read_text())
    assert snake_keys(doc) == [] and doc["consumers"]["latencyMs"] and doc["routes"]["latencyMs"]
    (fig,) = figures
    top = fig.axes[0]
    assert "deliveries" in top.get_ylabel() and "sends" in top.get_ylabel()
    title = fig._suptitle.get_text()
    assert "6 producers and 2 consumers in 1 group(s)" in title
    cons = doc["consumers"]  # messages, and the re-deliveries apart (issue 29)
    assert f"{cons['distinct']:,} messages consumed ({cons['redeliveries']:,} re-deliveries)" in title
    load_span, run_span = spans(doc)
    assert load_span[1] - load_span[0] == pytest.approx(2.5)  # one partition: its 2.5 s of load
    expected = _rounded(rate_pieces(doc["timeline"]["ok"], *load_span))
    assert _bars(top, "sends stored") == expected
    partial = [b for b in expected if 0 < b[1] - b[0] < 1 and b[2] > 0]
    assert partial, expected  # 2.5 s of load: at least one second only partly covered, drawn as a rate
    values, edges = stairs_of(rate_pieces(doc["consumers"]["perSecondSeries"], *run_span))
    consumed = _stairs(top, f"delivered ({cons['consumptions']:,}, {cons['redeliveries']:,} of them re-deliveries)")
    assert list(consumed.get_data().values) == pytest.approx(values)
    assert list(consumed.get_data().edges) == pytest.approx(edges)
    firsts = [p for p in top.patches if type(p).__name__ == "StepPatch" and p.get_label().startswith("first deliveries")]
    if cons["redeliveries"]:  # the distinct messages' line, each in the second it was first consumed
        (first,) = firsts
        values, _ = stairs_of(rate_pieces(cons["firstPerSecondSeries"], *run_span))
        assert list(first.get_data().values) == pytest.approx(values)
    else:
        assert firsts == []  # the same line as the deliveries: not drawn twice
