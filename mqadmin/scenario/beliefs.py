"""What the NameServers believed during a run, from the observer's route changes, for comparing runs.

For each observed topic:

* after each action that can change routes (not a ``wait_until``, not a consumer action), until the
  next one: when each NameServer's route first changed and what changed, when the routes **settled**
  (the last change on any NameServer in that window: route convergence time) and whether the
  NameServers then **agreed**;
* every broker a NameServer **dropped** from the route (listed, then not) and took **back**, with times;
* the brokers each NameServer **kept**: listed at the end of the run.

A NameServer that does not answer (killed, restarting) is not a route: its silence changes nothing
here, and its first answer after it is the change that counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mqadmin.scenario.model import CONSUMER_ACTION_KINDS as CONSUMER_ACTIONS
from mqadmin.scenario.observer import Observer, Summary, diff_text, present

if TYPE_CHECKING:
    from mqadmin.scenario.runner import ActionResult, RunResult


@dataclass
class AfterAction:
    """The routes of one topic after one action, until the next action (or the end)."""

    action: str
    t: float  # when the action took effect
    until: float
    first_change: dict[int, tuple[float, str]] = field(default_factory=dict)  # namesrv -> (s after, what)
    settled: float | None = None  # s after the action of the window's last change; None: nothing changed
    agree: bool = True  # the answering NameServers had the same route at the window's end

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "t": round(self.t, 4), "until": round(self.until, 4),
                "firstChange": {str(ns): {"after": round(dt, 4), "change": what}
                                for ns, (dt, what) in sorted(self.first_change.items())},
                "settled": None if self.settled is None else round(self.settled, 4), "agree": self.agree}


@dataclass
class TopicBeliefs:
    topic: str
    after: list[AfterAction] = field(default_factory=list)
    dropped: list[tuple[int, str, float]] = field(default_factory=list)  # (namesrv, broker, t)
    back: list[tuple[int, str, float]] = field(default_factory=list)
    kept: dict[int, list[str]] = field(default_factory=dict)  # namesrv -> brokers listed at the end

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "afterActions": [a.to_json() for a in self.after],
            "dropped": [{"namesrv": ns, "broker": b, "t": round(t, 4)} for ns, b, t in self.dropped],
            "back": [{"namesrv": ns, "broker": b, "t": round(t, 4)} for ns, b, t in self.back],
            "kept": {str(ns): brokers for ns, brokers in sorted(self.kept.items())},
        }


def route_actions(result: RunResult) -> list[ActionResult]:
    """The actions that can change what a NameServer believes, in order."""
    return [a for a in result.actions if a.ok and a.action.kind != "wait_until"
            and a.action.kind not in CONSUMER_ACTIONS]


def _listed(summary: Summary) -> set[str]:
    return {b for b, view in (summary or {}).items() if present(view)}


def beliefs(result: RunResult) -> list[TopicBeliefs]:
    """Every observed topic's beliefs (empty when the run had no observer)."""
    obs = result.observer
    if obs is None:
        return []
    return [topic_beliefs(obs, topic, route_actions(result), result.end) for topic in result.scenario.observe_topics]


def topic_beliefs(obs: Observer, topic: str, actions: list[ActionResult], end: float) -> TopicBeliefs:
    out = TopicBeliefs(topic)
    namesrvs = range(len(obs.addrs))
    events = sorted((e for e in obs.events if e.topic == topic and not e.first), key=lambda e: e.t)
    for i, a in enumerate(actions):
        until = actions[i + 1].effect if i + 1 < len(actions) else end
        window = AfterAction(a.text, a.effect, until)
        inside = [e for e in events if a.effect <= e.t < until and e.after is not None]
        for e in inside:
            window.first_change.setdefault(e.namesrv, (e.t - a.effect, diff_text(e.before, e.after)))
        if inside:
            window.settled = inside[-1].t - a.effect
        states = [s for s in (obs.state_at(ns, topic, until - 1e-9) for ns in namesrvs) if s is not None]
        window.agree = all(s == states[0] for s in states)
        out.after.append(window)
    answers = sorted((e for e in obs.events if e.topic == topic and e.after is not None), key=lambda e: e.t)
    for ns in namesrvs:
        listed: set[str] | None = None  # what its last answer listed
        for e in (e for e in answers if e.namesrv == ns):
            now = _listed(e.after)
            if listed is not None:
                out.dropped += [(ns, b, e.t) for b in sorted(listed - now)]
                out.back += [(ns, b, e.t) for b in sorted(now - listed)]
            listed = now
        out.kept[ns] = sorted(listed or ())
    return out


__all__ = ["AfterAction", "TopicBeliefs", "beliefs", "route_actions", "topic_beliefs"]
