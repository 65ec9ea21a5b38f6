"""The local cluster's accounts (``mqadmin start --auth``), and which keys a command signs with.

``start --auth`` writes ``conf/plain_acl.yml`` into the state directory with two accounts: an
admin account (every request class), which the brokers and mqadmin sign with, and a normal
account (route queries and the data path) for applications. Beside it ``conf/tools.yml`` holds the
admin keys in the form of Apache's tools.yml, so ``ROCKETMQ_HOME=<state dir>`` also lets Java's
mqadmin in. Both files, and the brokers' configs that carry the admin keys, are 0600 in a 0700
directory; ``cluster.json`` records only that the cluster has accounts, never a key.

:func:`security_for` is the one answer to "which keys does this command sign with": the keys given
on the command line (or in the environment), else the local cluster's admin keys when the command
talks to the local cluster, else ``$ROCKETMQ_HOME/conf/tools.yml`` as Apache's mqadmin reads it,
else none. The same for TLS: ``--tls`` options, else the local cluster's certificate when it was
started with ``--tls`` and the command talks to it, else plain TCP.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from mqadmin.client.security import (
    UNSIGNED,
    ClientSecurity,
    TlsOptions,
    read_tools_yml,
    tools_yml_path,
    write_private,
    write_tools_yml,
)
from mqadmin.localcluster.certs import cluster_tls
from mqadmin.localcluster.namesrvs import local_cluster_of
from mqadmin.localcluster.state import ClusterError, ClusterState
from remoting.acl import Credentials

ADMIN_ACCESS_KEY = "localAdmin"
USER_ACCESS_KEY = "localUser"
#: 32 random bytes, URL-safe Base64: no character YAML or a .properties file treats specially.
SECRET_BYTES = 32


@dataclass(frozen=True)
class LocalAccounts:
    """The two accounts of a local cluster with ``--auth``, and the files that hold them."""

    admin: Credentials
    user: Credentials
    acl_path: Path
    tools_path: Path


def conf_dir(state_dir: Path) -> Path:
    return state_dir / "conf"


def create_accounts(state_dir: Path) -> LocalAccounts:
    """New keys for a cluster about to start in ``state_dir`` (a restarted cluster gets new ones)."""
    conf = conf_dir(state_dir)
    conf.mkdir(mode=0o700, exist_ok=True)
    conf.chmod(0o700)
    admin = Credentials(ADMIN_ACCESS_KEY, secrets.token_urlsafe(SECRET_BYTES))
    user = Credentials(USER_ACCESS_KEY, secrets.token_urlsafe(SECRET_BYTES))
    accounts = LocalAccounts(admin, user, conf / "plain_acl.yml", conf / "tools.yml")
    write_private(accounts.acl_path, (
        "# Made by `mqadmin start --auth`: new keys at every start.\n"
        "# localAdmin: every request class (mqadmin, the brokers); localUser: routes and the data path.\n"
        "accounts:\n"
        f"  - accessKey: {admin.access_key}\n    secretKey: {admin.secret_key}\n"
        "    whiteRemoteAddress:\n    admin: true\n"
        f"  - accessKey: {user.access_key}\n    secretKey: {user.secret_key}\n"
        "    whiteRemoteAddress:\n    admin: false\n"
    ))
    write_tools_yml(accounts.tools_path, admin)
    return accounts


def local_accounts(state: ClusterState) -> LocalAccounts | None:
    """The accounts of a cluster started with ``--auth`` (None without); ClusterError if its files are gone."""
    if not state.auth:
        return None
    conf = conf_dir(Path(state.dir))
    acl_path, tools_path = conf / "plain_acl.yml", conf / "tools.yml"
    try:
        doc = yaml.load(acl_path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))  # noqa: S506
        keys = {a["accessKey"]: a["secretKey"] for a in doc["accounts"]}
        return LocalAccounts(Credentials(ADMIN_ACCESS_KEY, keys[ADMIN_ACCESS_KEY]),
                             Credentials(USER_ACCESS_KEY, keys[USER_ACCESS_KEY]), acl_path, tools_path)
    except OSError as exc:
        raise ClusterError(f"the local cluster in {state.dir} has accounts, but {acl_path} cannot be read: "
                           f"{exc.strerror or exc}") from None
    except (yaml.YAMLError, KeyError, TypeError) as exc:
        raise ClusterError(f"the local cluster in {state.dir} has accounts, but {acl_path} is not the file "
                           f"mqadmin start --auth wrote ({exc})") from None


def admin_security(state: ClusterState) -> ClientSecurity:
    """How tools talk to this cluster: signed with its admin keys (unsigned without accounts), over
    TLS trusting its certificate when it was started with ``--tls``."""
    accounts = local_accounts(state)
    tls = cluster_tls(state)
    if accounts is None:
        return UNSIGNED if tls is None else ClientSecurity(tls=tls)
    return ClientSecurity(accounts.admin, f"the local cluster in {state.dir}", tls)


def app_credentials(state: ClusterState) -> Credentials | None:
    """What simulated applications sign with against this cluster: its normal account's keys, or nothing."""
    accounts = local_accounts(state)
    return None if accounts is None else accounts.user


def security_for(namesrv: str | None, given: Credentials | None, state_dir: Path | None = None, *,
                 tls: TlsOptions | None = None) -> ClientSecurity:
    """The keys a command signs with and how it connects (see the module): ``given`` keys and ``tls``
    options win; the local cluster's admin keys and certificate apply to the commands that talk to
    it. AdminError (one line) for a tools.yml that cannot be used."""
    state = local_cluster_of(namesrv, state_dir)
    local = admin_security(state) if state is not None else None
    tls = tls if tls is not None else (local.tls if local is not None else None)
    if given is not None:
        return ClientSecurity(given, "--access-key", tls)
    if local is not None and local.credentials is not None:
        return replace(local, tls=tls)
    path = tools_yml_path()
    if path is not None:
        from_file = read_tools_yml(path)
        if from_file is not None:
            return ClientSecurity(from_file, str(path), tls)
    return ClientSecurity(tls=tls)
