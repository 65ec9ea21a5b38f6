"""NameServer commands (Apache's tools/command/namesrv): KV config, write permission, NameServer config.

Each is sent to every NameServer (they never share state), with one result line per NameServer;
a NameServer that does not answer is a failed line and makes the exit status 1.
"""

from __future__ import annotations

import typer

from mqadmin.client import run
from mqadmin.client.errors import PerServer
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, bad_option, client_for
from mqadmin.commands.results import exit_if_any_failed, per_server, print_failure, print_results
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from namesrv.config_policy import config_view, key_class


def not_empty(option: str, value: str) -> str:
    """A namespace, key or broker name: never empty (Apache's NameServer would store an empty key)."""
    if not value.strip():
        raise bad_option(option, "must not be empty")
    return value.strip()


def update_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    value: str = typer.Option(..., "-v", "--value", help="Value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    namespace, key = not_empty("-s", namespace), not_empty("-k", key)
    if not value.strip():
        raise bad_option("-v", "the value is empty (to remove the key, use deleteKvConfig)")
    results = run(client_for(namesrv, timeout).put_kv, namespace, key, value)
    per_server(results, "create or update kv config to namespace success. [{addr}]", as_json)


def delete_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    namespace, key = not_empty("-s", namespace), not_empty("-k", key)
    results = run(client_for(namesrv, timeout).delete_kv, namespace, key)
    per_server(results, "delete kv config from namespace success. [{addr}]", as_json)


def get_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str | None = typer.Option(None, "-k", "--key", help="Key (default: the whole namespace)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    namespace = not_empty("-s", namespace)
    key = not_empty("-k", key) if key is not None else None
    client = client_for(namesrv, timeout)
    table = {key: run(client.get_kv, namespace, key)} if key is not None else run(client.kv_list, namespace)
    if as_json:
        print_json({"namespace": namespace, "table": table})
        return
    out.print(fit_table([Col("#Key"), Col("#Value", wrap=True)], [[k, v] for k, v in sorted(table.items())],
                        title=f"namespace {namespace}"))


def wipe_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    broker = not_empty("-b", broker)
    results = run(client_for(namesrv, timeout).wipe_write_perm, broker)
    _write_perm_results(results, broker, "wipe", as_json)


def add_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    broker = not_empty("-b", broker)
    results = run(client_for(namesrv, timeout).add_write_perm, broker)
    _write_perm_results(results, broker, "add", as_json)


def _write_perm_results(results: list[PerServer], broker: str, verb: str, as_json: bool) -> None:
    """Apache's line per NameServer (``OK, N``: N topics changed), and ours after them: a NameServer that
    changed no topic does not know the broker (a typo, or a NameServer that missed it), which Apache's
    tool leaves the operator to notice from the 0. It is a warning on stderr and exit status 1."""
    if as_json:
        print_json({"results": [r.to_json() for r in results]})
    else:
        print_results(results, f"{verb} write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}")
    unknown = [r.addr for r in results if r.ok and r.value == 0]
    finding = None
    if unknown and len(unknown) == len(results):
        finding = (f"no NameServer knows broker {broker} (asked {', '.join(unknown)}): no topic changed "
                   "(clusterList shows the broker names)")
    elif unknown:
        finding = (f"{len(unknown)} of {len(results)} NameServers ({', '.join(unknown)}) do not know broker {broker}: "
                   "no topic changed there")
    exit_if_any_failed(results, also=finding)


def get_namesrv_config(
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
    classes: bool = typer.Option(
        False, "--classes", help="Show whether updateNamesrvConfig applies each key live, at restart, never (inert) or refuses it."
    ),
) -> None:
    results = run(client_for(namesrv, timeout).namesrv_configs)
    if as_json:
        print_json({r.addr: (config_view(r.value, classes) if r.ok else {"error": r.error}) for r in results})
    else:
        for r in results:
            if not r.ok:
                print_failure(r)
                continue
            out.print(f"============{r.addr}============")
            black_list = r.value.get("configBlackList", "")
            for k, v in r.value.items():
                suffix = f"  [{key_class(k, black_list)}]" if classes else ""
                out.print(f"{k:<50}=  {v}{suffix}")
    exit_if_any_failed(results)


def update_namesrv_config(
    key: str = typer.Option(..., "-k", "--key", help="Config key."),
    value: str = typer.Option(..., "-v", "--value", help="New value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).update_namesrv_config, not_empty("-k", key), value)
    per_server(results, f"update name server config success! [{{addr}}] {key} : {value}", as_json)


def register(app: typer.Typer) -> None:
    app.command("updateKvConfig", help="Create or update a KV config entry on every NameServer.")(update_kv)
    app.command("deleteKvConfig", help="Delete a KV config entry on every NameServer.")(delete_kv)
    app.command("getKvConfig", help="Show one KV config value, or a whole namespace.")(get_kv)
    app.command("wipeWritePerm", help="Remove write permission of a broker's topics on every NameServer.")(wipe_write_perm)
    app.command("addWritePerm", help="Restore write permission of a broker's topics on every NameServer.")(add_write_perm)
    app.command("getNamesrvConfig", help="Show every NameServer's configuration.")(get_namesrv_config)
    app.command("updateNamesrvConfig", help="Change one setting on every NameServer.")(update_namesrv_config)
