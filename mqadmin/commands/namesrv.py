"""NameServer commands (Apache's tools/command/namesrv): KV config, write permission, NameServer config.

Each is sent to every NameServer (they never share state), with one result line per NameServer;
a NameServer that does not answer is a failed line and makes the exit status 1.
"""

from __future__ import annotations

import typer

from mqadmin.client import run
from mqadmin.commands.options import JsonOpt, NamesrvOpt, TimeoutOpt, client_for
from mqadmin.commands.results import per_server
from mqadmin.output.console import out, print_json
from mqadmin.output.tables import Col, fit_table
from namesrv.config_policy import config_view, key_class


def update_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    value: str = typer.Option(..., "-v", "--value", help="Value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).put_kv, namespace, key, value)
    per_server(results, "create or update kv config to namespace success. [{addr}]", "{error}", as_json)


def delete_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str = typer.Option(..., "-k", "--key", help="Key."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).delete_kv, namespace, key)
    per_server(results, "delete kv config from namespace success. [{addr}]", "{error}", as_json)


def get_kv(
    namespace: str = typer.Option(..., "-s", "--namespace", help="Namespace."),
    key: str | None = typer.Option(None, "-k", "--key", help="Key (default: the whole namespace)."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
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
    results = run(client_for(namesrv, timeout).wipe_write_perm, broker)
    per_server(
        results,
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"wipe write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
        as_json,
    )


def add_write_perm(
    broker: str = typer.Option(..., "-b", "--brokerName", help="Broker name."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).add_write_perm, broker)
    per_server(
        results,
        f"add write perm of broker[{broker}] in name server[{{addr}}] OK, {{value}}",
        f"add write perm of broker[{broker}] in name server[{{addr}}] Failed: {{error}}",
        as_json,
    )


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
            out.print(f"============{r.addr}============")
            if not r.ok:
                out.print(r.error, style="red")
                continue
            black_list = r.value.get("configBlackList", "")
            for k, v in r.value.items():
                suffix = f"  [{key_class(k, black_list)}]" if classes else ""
                out.print(f"{k:<50}=  {v}{suffix}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


def update_namesrv_config(
    key: str = typer.Option(..., "-k", "--key", help="Config key."),
    value: str = typer.Option(..., "-v", "--value", help="New value."),
    namesrv: str | None = NamesrvOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    results = run(client_for(namesrv, timeout).update_namesrv_config, key, value)
    per_server(results, f"update name server config success! [{{addr}}] {key} : {value}", "{error}", as_json)


def register(app: typer.Typer) -> None:
    app.command("updateKvConfig", help="Create or update a KV config entry on every NameServer.")(update_kv)
    app.command("deleteKvConfig", help="Delete a KV config entry on every NameServer.")(delete_kv)
    app.command("getKvConfig", help="Show one KV config value, or a whole namespace.")(get_kv)
    app.command("wipeWritePerm", help="Remove write permission of a broker's topics on every NameServer.")(wipe_write_perm)
    app.command("addWritePerm", help="Restore write permission of a broker's topics on every NameServer.")(add_write_perm)
    app.command("getNamesrvConfig", help="Show every NameServer's configuration.")(get_namesrv_config)
    app.command("updateNamesrvConfig", help="Change one setting on every NameServer.")(update_namesrv_config)
