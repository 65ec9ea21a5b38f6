"""Things done to the cluster during a fan-out run, on the run's time axis.

Two kinds: ``--kill-broker NAME@SECONDS`` (SIGKILL to a master at a given
time) and ``--scenario FILE`` (the scenario's whole timeline, carried out
by :class:`mqadmin.scenario.actions.Executor` with its route observer).
Both run in a driver thread while the engine runs the load, and record
each event in seconds since the start barrier. Scenario expectations about
routes are judged from the observer as ``mqadmin scenario run`` does;
expectations about sends are judged from the fan-out's counters when they
cover the whole run (a fan-out keeps counts, not one record per send).
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from mqadmin.fanout.metrics import FanoutMetrics
from mqadmin.localcluster import processes
from mqadmin.localcluster.accounts import admin_security
from mqadmin.localcluster.state import ClusterError, ClusterState

if TYPE_CHECKING:
    from mqadmin.scenario.model import Expectation, Scenario
    from mqadmin.scenario.observer import Observer


@dataclass
class Event:
    t: float  # s since the start barrier, when the action ended
    what: str  # "kill broker-a", "kill_broker broker-a", ...
    ok: bool
    detail: str
    kind: str = ""
    broker: str | None = None  # the broker an action was aimed at, if any
    planned: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"t": round(self.t, 4), "what": self.what, "kind": self.kind, "broker": self.broker,
                "planned": self.planned, "ok": self.ok, "detail": self.detail}


class Timeline:
    """Runs in its own thread; ``stop`` ends it early (the run is over or failed)."""

    def __init__(self, start_wall: float) -> None:
        self.start_wall = start_wall
        self.events: list[Event] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._main, name="fanout-timeline", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def now(self) -> float:
        return time.time() - self.start_wall

    def _main(self) -> None:
        raise NotImplementedError


class KillTimeline(Timeline):
    """SIGKILL to a broker's master at given times (``--kill-broker``)."""

    def __init__(self, state: ClusterState | None, kills: tuple[tuple[str, float], ...], start_wall: float) -> None:
        super().__init__(start_wall)
        self.state = state
        self.kills = sorted(kills, key=lambda k: k[1])

    def _main(self) -> None:
        for name, at in self.kills:
            if self._stop.wait(max(0.0, at - self.now())):
                return
            assert self.state is not None
            try:
                proc = self.state.find_broker(name, 0)[0]
                processes.signal_proc(proc, signal.SIGKILL)
                ok, detail = not proc.alive(), f"SIGKILL to {proc.name} (pid {proc.pid})"
            except ClusterError as exc:
                ok, detail = False, str(exc)
            self.events.append(Event(self.now(), f"kill {name}", ok, detail, "kill_broker", name, at))


class ScenarioTimeline(Timeline):
    """A scenario's timeline and route observer, on a trio loop of this thread."""

    def __init__(self, scn: Scenario, state: ClusterState, namesrvs: list[str], start_wall: float) -> None:
        super().__init__(start_wall)
        self.scn = scn
        self.state = state
        self.namesrvs = namesrvs
        self.observer: Observer | None = None
        self.end = 0.0
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        token, scope = self._token, self._scope
        if token is not None and scope is not None:
            try:
                trio.from_thread.run_sync(scope.cancel, trio_token=token)
            except trio.RunFinishedError:
                pass
        super().stop(timeout)

    def _main(self) -> None:
        try:
            trio.run(self._async)
        except Exception as exc:  # noqa: BLE001 (reported as an event; the load goes on)
            self.events.append(Event(self.now(), "timeline", False, f"{type(exc).__name__}: {exc}"))

    async def _async(self) -> None:
        from mqadmin.scenario.actions import ActionError, Executor
        from mqadmin.scenario.observer import Observer

        self._token = trio.lowlevel.current_trio_token()
        scn = self.scn
        # trio's clock at the start barrier: time zero of the scenario.
        t0 = trio.current_time() + (self.start_wall - time.time())
        obs = self.observer = Observer(self.namesrvs, scn.observe_topics, interval=scn.observe_interval,
                                       timeout=scn.observe_timeout, t0=t0, security=admin_security(self.state))
        executor = Executor(self.state, obs)
        with trio.CancelScope() as scope:
            self._scope = scope
            if self._stop.is_set():
                return
            async with trio.open_nursery() as nursery:
                await nursery.start(obs.run)
                for action in scn.timeline:
                    if action.at is not None:
                        await trio.sleep_until(t0 + action.at)
                    text = action.describe()
                    try:
                        detail, ok = await executor.run(action), True
                    except ActionError as exc:
                        detail, ok = str(exc), False
                    self.events.append(Event(obs.now(), text, ok, detail, action.kind, action.args.get("broker"),
                                             action.at))
                await trio.sleep_forever()  # keep observing until the run ends
        self.end = obs.now()

    def verdicts(self, scn: Scenario, metrics: FanoutMetrics) -> list[dict[str, Any]]:
        """Each expectation: judged from the observer (routes) or the counters (whole-run sends), else left out."""
        from mqadmin.scenario.expectations import evaluate

        labels = {a.label: e.t for a, e in zip(scn.timeline, self.events) if a.label and e.ok}
        end = self.end or self.now()
        out = []
        for i, exp in enumerate(scn.expectations, 1):
            if exp.condition is not None and self.observer is not None:
                out.append(evaluate(scn, exp, i, obs=self.observer, records=[], label_times=labels, end=end).to_json())
            else:
                out.append(_from_counts(exp, i, metrics))
        return out


def _from_counts(exp: Expectation, index: int, m: FanoutMetrics) -> dict[str, Any]:
    """Send expectations over the whole run, from the merged counters (windows need per-send records)."""
    base = {"index": index, "kind": exp.kind, "expectation": exp.describe(), "line": exp.line}
    whole_run = exp.after is None and exp.window.start is None and exp.window.end is None and exp.producers is None
    thr = exp.threshold
    if not whole_run or thr is None or exp.kind == "p99_send_latency" and exp.outcome != "all":
        return {**base, "passed": None, "measured": None, "measuredText": "not evaluated",
                "target": "-", "detail": "needs per-send records (windows, labels or groups); a fan-out keeps counts"}
    load = m.load
    if exp.kind == "send_success_rate":
        rate = load.ok / load.sends if load.sends else 0.0
        ok = load.sends > 0 and rate >= thr and (exp.upper is None or rate <= exp.upper)
        return {**base, "passed": ok, "measured": round(rate, 6), "measuredText": f"{rate:.4f} ({load.ok}/{load.sends})",
                "target": f"≥ {thr:g}" if exp.upper is None else f"{thr:g}..{exp.upper:g}", "detail": ""}
    if exp.kind == "max_failed_sends":
        return {**base, "passed": load.failed <= thr, "measured": float(load.failed), "measuredText": str(load.failed),
                "target": f"≤ {thr:g}", "detail": ""}
    if exp.kind == "p99_send_latency":
        p99 = load.latency.percentile(99)
        return {**base, "passed": p99 <= thr, "measured": round(p99, 3), "measuredText": f"{p99:.1f} ms",
                "target": f"≤ {thr:g} ms", "detail": "from 5 % latency buckets"}
    stored = load.by_broker.get(exp.broker or "", 0)
    ok = stored <= thr if exp.kind == "max_sends_to" else stored >= thr
    return {**base, "passed": ok, "measured": float(stored), "measuredText": str(stored),
            "target": f"{'≤' if exp.kind == 'max_sends_to' else '≥'} {thr:g}", "detail": ""}
