"""Which NameServers a command talks to: ``-n``, else ``$NAMESRV_ADDR``, else the local cluster's.

The one place this is decided, for the admin commands and the fan-out alike.
From the local cluster it is *every* NameServer recorded, stopped ones
included: a NameServer the operator killed still belongs to the cluster, and
leaving it out would let a write reach one NameServer and report success, or
``watch`` report agreement, while the two disagree. A stopped one is asked like
any other and counts as a failed server. Only when every NameServer of the
cluster is stopped is there nobody to ask; the error then names them and says
how to bring them back.
"""

from __future__ import annotations

from pathlib import Path

from mqadmin.client.addresses import namesrv_from_env, split_addrs
from mqadmin.client.errors import AdminError
from mqadmin.localcluster.state import ClusterError, ClusterState, default_dir


def namesrv_addrs(given: str | None, state_dir: Path | None = None, option: str = "-n") -> list[str]:
    """``given`` (an ``option`` value), else ``$NAMESRV_ADDR``, else the NameServers of the local cluster in
    ``state_dir`` (default: the usual one).

    An :class:`AdminError` when none can be found; a bad ``given`` raises one too, which a command
    reports as a usage error of ``option``.
    """
    if given is not None:
        return split_addrs(given)
    try:
        addrs = namesrv_from_env()
    except AdminError as exc:
        raise AdminError(f"NAMESRV_ADDR: {exc}") from None
    if addrs:
        return addrs
    try:
        state = ClusterState.load(state_dir or default_dir())
    except ClusterError:
        state = None
    if state is None or not state.namesrvs:
        raise AdminError(f"no NameServer address: give {option} host:port, set NAMESRV_ADDR or run mqadmin start")
    where = "" if state_dir is None else f" --dir {state.dir}"
    if not any(p.alive() for p in [*state.namesrvs, *state.brokers]):  # a fault proxy alone runs nothing
        raise AdminError(f"the local cluster in {state.dir} is not running (every process is stopped): "
                         f"start it again with mqadmin start{where}")
    if not any(p.alive() for p in state.namesrvs):
        stopped = ", ".join(f"{p.name} ({p.addr})" for p in state.namesrvs)
        again = ", then ".join(f"-i {i}" for i in range(len(state.namesrvs)))
        raise AdminError(f"every NameServer of the local cluster in {state.dir} is stopped: {stopped}; "
                         f"start them again with mqadmin restartNamesrv {again}{where}")
    return [p.addr for p in state.namesrvs]


def local_cluster_of(namesrv: str | None, state_dir: Path | None = None) -> ClusterState | None:
    """The local cluster (in ``state_dir``, default the usual one) when the NameServers a command talks
    to are its own: ``-n`` (``namesrv``), else $NAMESRV_ADDR, names none other. Then what it recorded
    (its keys, its brokers' addresses) applies to the command; otherwise, or without a cluster, None."""
    try:
        state = ClusterState.load(state_dir or default_dir())
    except ClusterError:
        return None
    mine = {p.addr for p in state.namesrvs}
    try:
        given = split_addrs(namesrv) if namesrv is not None else namesrv_from_env()
    except AdminError:
        return None  # a bad -n or NAMESRV_ADDR is reported where the addresses are read
    return state if not given or set(given) <= mine else None
