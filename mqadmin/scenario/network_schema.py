"""The network side of scenario files: faults on the local cluster's fault proxy paths.

Kept apart from :mod:`mqadmin.scenario.schema` (which calls in here), like the consumer side::

    cluster:
      fault_proxy: true        # default: true when the timeline has one of the actions below
      client_proxy: false      # true: clients reach brokers through the proxy too (network_fault clients: true)
    timeline:
      - partition: broker-a    # nothing crosses between broker-a and namesrv 0, either way; connections stay
        namesrv: 0             #   open, so namesrv 0 drops it after broker_expired_ms
      - network_fault: broker-a
        namesrv: 0             # default: the paths to every NameServer
        latency_ms: 200        # or jitter_ms beside it; or bandwidth_kbps: N; or blackhole: upstream|downstream|both;
        stream: both           #   or refuse: true; or reset: true. stream: for latency_ms and bandwidth_kbps
        clients: false         # true: the clients' path to the broker instead (needs cluster.client_proxy)
      - heal: broker-a         # every network fault of its paths (to namesrv, or every path of the broker)

``broker_id`` (default 0) picks a slave. Every action is recorded in the report with its start and
end like any other, with the text :class:`mqadmin.scenario.model.Action` gives it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from mqadmin.scenario.model import NETWORK_ACTION_KINDS as ACTION_KINDS
from mqadmin.scenario.model import NETWORK_FAULT_OPS as FAULT_OPS
from mqadmin.scenario.model import Action, ClusterSpec
from mqadmin.scenario.reader import ScenarioReader
from mqadmin.scenario.values import _Ctx, _Section, boolean, choice, integer

MAIN_PARAM = dict.fromkeys(ACTION_KINDS, "broker")
STREAMS = ("both", "upstream", "downstream")


def parse_action(p: ScenarioReader, kind: str, sec: _Section) -> dict[str, Any]:
    args: dict[str, Any] = {"broker": p.broker(sec), "broker_id": p.broker_id(sec)}
    if kind == "partition":
        args["namesrv"] = p.namesrv(sec)
        return args
    args["clients"] = sec.get("clients", boolean, False)
    if args["clients"]:
        if not p.cluster.client_proxy:
            raise sec.fail("clients", "the clients' path needs cluster.client_proxy: true")
        if sec.has("namesrv"):
            raise sec.fail("namesrv", "a clients' path leads to the broker, not to a NameServer")
    args["namesrv"] = p.namesrv(sec, default=None)
    if kind == "heal":
        return args
    ops = [k for k in FAULT_OPS if sec.has(k)]
    if len(ops) != 1:
        raise sec.fail(None, f"network_fault needs exactly one of {', '.join(FAULT_OPS)}; found {len(ops)}")
    op = ops[0]
    if op == "latency_ms":
        args[op] = sec.get(op, integer(0, 600_000))
        args["jitter_ms"] = sec.get("jitter_ms", integer(0, 600_000), 0)
    elif op == "bandwidth_kbps":
        args[op] = sec.get(op, integer(1, 10_000_000))
    elif op == "blackhole":
        args[op] = sec.get(op, choice(*STREAMS))
    elif not sec.get(op, boolean):
        raise sec.fail(op, f"{op}: false means nothing; remove it")
    else:
        args[op] = True
    if op in ("latency_ms", "bandwidth_kbps"):
        args["stream"] = sec.get("stream", choice(*STREAMS), "both")
    return args


def fault_of(args: Mapping[str, Any]) -> dict[str, Any]:
    """A network_fault's operation as :func:`mqadmin.localcluster.faultpaths.apply` takes it."""
    if "latency_ms" in args:
        return {"fault": "latency", "millis": args["latency_ms"], "jitter": args["jitter_ms"], "stream": args["stream"]}
    if "bandwidth_kbps" in args:
        return {"fault": "bandwidth", "rate_kbps": args["bandwidth_kbps"], "stream": args["stream"]}
    if "blackhole" in args:
        return {"fault": "blackhole", "stream": args["blackhole"]}
    return {"fault": "refuse" if "refuse" in args else "reset"}


def resolve_fault_proxy(ctx: _Ctx, cluster: ClusterSpec, actions: Sequence[Action], line: int) -> ClusterSpec:
    """``cluster.fault_proxy`` left out: a proxy exactly when the run needs one (no process added otherwise);
    ``false`` with a network action (or client_proxy) is an error on its line."""
    uses = [a for a in actions if a.kind in ACTION_KINDS]
    needed = bool(uses) or cluster.client_proxy
    if cluster.fault_proxy is False and uses:
        raise ctx.error(line, "cluster.fault_proxy", f"is false, but the {uses[0].kind} action on line "
                                                     f"{uses[0].line} needs the fault proxy")
    return dataclasses.replace(cluster, fault_proxy=needed if cluster.fault_proxy is None else cluster.fault_proxy)
