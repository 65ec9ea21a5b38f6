"""Carry out timeline actions on the scenario's local cluster.

Process actions use :mod:`mqadmin.localcluster.processes` (signals, graceful stop,
restart on the same port); the blocking ones run in a worker thread so the
producers and the observer keep going meanwhile. Network faults (partition,
heal, network_fault) go to the cluster's fault proxy
(:mod:`mqadmin.localcluster.faultpaths`), whatever the broker is; the other
broker faults to the broker stub's fault switchboard (request code 9000, see
:mod:`broker_stub.faults`), permission changes to every NameServer, topic
creation to the masters. Each action returns a one-line detail or raises
:class:`ActionError`.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from faultproxy.client import describe_faults
from mqadmin.client import AdminClient
from mqadmin.client.errors import AdminError
from mqadmin.localcluster import faultpaths, processes
from mqadmin.localcluster.accounts import admin_security
from mqadmin.localcluster.state import ClusterError, ClusterState, Proc
from mqadmin.scenario.expectations import holds, holds_through, stable_hold
from mqadmin.scenario.model import CONSUMER_ACTION_KINDS as CONSUMER_ACTIONS
from mqadmin.scenario.model import NETWORK_ACTION_KINDS as NETWORK_ACTIONS
from mqadmin.scenario.model import Action
from mqadmin.scenario.network_schema import fault_of
from mqadmin.scenario.observer import Observer
from remoting.bodies import TopicConfig

RPC_TIMEOUT = 3.0


class ActionError(Exception):
    """An action could not be carried out; the message is one line."""


class Executor:
    def __init__(self, state: ClusterState, observer: Observer) -> None:
        self.state = state
        self.observer = observer
        self.security = admin_security(state)  # the cluster's admin keys when it has accounts
        #: carries out start/stop/kill_consumer (mqadmin.scenario.consumers.ConsumerFleet.action)
        self.consumer_actions: Callable[[Action], Awaitable[str]] | None = None

    # ------------------------------------------------------------------

    def _broker(self, action: Action) -> Proc:
        try:
            return self.state.find_broker(action.args["broker"], action.args.get("broker_id", 0))[0]
        except ClusterError as exc:
            raise ActionError(str(exc)) from None

    def _namesrv(self, index: int) -> Proc:
        return self.state.namesrvs[index]

    def _admin(self) -> AdminClient:
        return AdminClient([p.addr for p in self.state.namesrvs], timeout=RPC_TIMEOUT, security=self.security)

    async def _blocking(self, fn: Callable[[], None]) -> None:
        """Run a blocking cluster operation in a thread (not abandoned: no process may start after cleanup)."""
        try:
            await trio.to_thread.run_sync(fn)
        except ClusterError as exc:
            raise ActionError(str(exc)) from None

    async def _signal(self, proc: Proc, sig: signal.Signals) -> str:
        await self._blocking(lambda: processes.signal_proc(proc, sig))
        if sig in (signal.SIGKILL, signal.SIGTERM) and proc.alive():
            raise ActionError(f"{proc.name} (pid {proc.pid}) still runs {processes.signal_wait(proc):g} s after {sig.name}")
        return f"{sig.name} to {proc.name} (pid {proc.pid})"

    async def _fault(self, proc: Proc, action: str, **params: object) -> str:
        if not proc.alive():
            raise ActionError(f"{proc.name} is not running")
        try:
            await AdminClient([], timeout=RPC_TIMEOUT, security=self.security).broker_fault(proc.addr, action, **params)
        except AdminError as exc:
            raise ActionError(str(exc)) from None
        return f"{proc.name}: action={action}" + "".join(f" {k}={v}" for k, v in params.items())

    # ------------------------------------------------------------------

    async def run(self, action: Action) -> str:
        """Carry out one action; returns what was done."""
        a = action.args
        kind = action.kind
        if kind == "kill_broker":
            return await self._signal(self._broker(action), signal.SIGKILL)
        if kind == "stop_broker":
            return await self._signal(self._broker(action), signal.SIGSTOP)
        if kind == "cont_broker":
            return await self._signal(self._broker(action), signal.SIGCONT)
        if kind == "shutdown_broker":
            return await self._signal(self._broker(action), signal.SIGTERM)
        if kind in ("restart_broker", "restart_namesrv"):
            proc = self._broker(action) if kind == "restart_broker" else self._namesrv(a["namesrv"])
            was = "running" if proc.alive() else "stopped"
            await self._blocking(lambda: processes.restart(proc, self.state))
            self.state.save()
            return f"{proc.name} restarted ({was} before) as pid {proc.pid} on {proc.addr}"
        if kind == "kill_namesrv":
            sig = signal.SIGKILL if a["signal"] == "kill" else signal.SIGTERM
            return await self._signal(self._namesrv(a["namesrv"]), sig)
        if kind in NETWORK_ACTIONS:
            return await self._network(action)
        if kind == "fault":
            op, params = _fault_request(a)
            return await self._fault(self._broker(action), op, **params)
        if kind in ("wipe_write_perm", "add_write_perm"):
            return await self._perm(kind, a["broker"])
        if kind == "create_topic":
            return await self._create_topic(a["topic"], a["queues"], a["brokers"])
        if kind == "wait_until":
            return await self._wait_until(action)
        if kind in CONSUMER_ACTIONS:
            if self.consumer_actions is None:
                raise ActionError(f"{kind}: this run has no consumers")
            try:
                return await self.consumer_actions(action)
            except Exception as exc:  # noqa: BLE001 (ConsumerActionError and friends: one line, the run goes on)
                raise ActionError(str(exc)) from None
        raise ActionError(f"unknown action {kind}")

    async def _network(self, action: Action) -> str:
        """A fault on the broker's paths through the fault proxy; what each path does now."""
        a = action.args
        broker = self._broker(action)
        ns = None if a.get("namesrv") is None else self._namesrv(a["namesrv"])
        if action.kind == "partition":
            fault: dict[str, object] = {"fault": "partition"}
        elif action.kind == "heal":
            fault = {"fault": "heal"}
        else:
            fault = fault_of(a)

        def put() -> list[dict[str, object]]:
            if action.kind == "heal" and ns is None and not a.get("clients"):
                paths = faultpaths.every_path_of(self.state, broker)
            else:
                paths = faultpaths.paths_of(self.state, broker, ns, clients=bool(a.get("clients")))
            return faultpaths.apply(faultpaths.client(self.state), paths, **fault)  # type: ignore[arg-type]

        try:
            states = await trio.to_thread.run_sync(put)
        except ClusterError as exc:
            raise ActionError(str(exc)) from None
        return "; ".join(f"{s['name']}: {describe_faults(s)}" for s in states)

    async def _perm(self, kind: str, broker: str) -> str:
        admin = self._admin()
        try:
            results = await (admin.wipe_write_perm(broker) if kind == "wipe_write_perm" else admin.add_write_perm(broker))
        except AdminError as exc:
            raise ActionError(str(exc)) from None
        done = [f"{r.addr}: {r.value} topic(s)" for r in results if r.ok]
        if not done:
            raise ActionError(f"{kind} {broker} failed on every NameServer: {results[0].error}")
        failed = [r.error for r in results if not r.ok]
        return "; ".join(done + [f"failed: {e}" for e in failed])

    async def _create_topic(self, topic: str, queues: int, brokers: tuple[str, ...]) -> str:
        masters = [p.addr for p in self.state.brokers if p.broker_id == 0 and p.broker_name in brokers and p.alive()]
        if not masters:
            raise ActionError(f"no running master among {', '.join(brokers)} to create {topic} on")
        results = await AdminClient([], timeout=RPC_TIMEOUT, security=self.security).create_topic_on(masters, TopicConfig(topic, queues, queues))
        failed = [r.error for r in results if not r.ok]
        if failed:
            raise ActionError(f"create topic {topic}: {failed[0]}")
        return f"{topic} created on {len(masters)} master(s) with {queues} queues"

    async def _wait_until(self, action: Action) -> str:
        """Until the condition holds and keeps holding for longer than one polling interval (bounded)."""
        cond = action.condition
        assert cond is not None
        obs = self.observer
        n = len(obs.addrs)
        hold = stable_hold(obs.interval)
        begin = obs.now()
        with trio.move_on_after(action.args["timeout"]):
            while True:
                changed = obs.changed
                since = obs.now()
                if holds(cond, obs, since, n):
                    with trio.move_on_after(hold):
                        while True:  # wake at every change: fail fast when it stops holding
                            await changed.wait()
                            changed = obs.changed
                            if not holds(cond, obs, obs.now(), n):
                                break
                    if holds_through(cond, obs, since, obs.now(), n):
                        return f"{cond.describe()} after {since - begin:.2f} s"
                    continue
                await changed.wait()
        raise ActionError(f"not reached within {action.args['timeout']:g} s: {cond.describe()}")


def _fault_request(args: Mapping[str, Any]) -> tuple[str, dict[str, object]]:
    """The switchboard action and its parameters for a ``fault`` action (see broker_stub.faults)."""
    if "latency_ms" in args:
        return "latency", {"millis": args["latency_ms"]}
    if "reject" in args:
        return "reject", {"code": args["reject"]}
    for op in ("hang", "resume", "clear"):
        if op in args:
            return op, {}
    raise ActionError("fault without an operation")
