"""What every mqadmin command shares on the way in: the common options and the checks of option values.

A bad option value is a usage error: one line naming the option, exit 2 (:func:`bad_option`), raised
before anything is sent or started. The NameServers a command talks to are found in one place,
:func:`mqadmin.localcluster.namesrvs.namesrv_addrs`; :func:`client_for` only turns a bad ``-n`` into
a usage error.
"""

from __future__ import annotations

import contextvars
import datetime
import functools
import importlib.util
import inspect
import os
import re
import tempfile
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import typer

from mqadmin.client import AdminClient
from mqadmin.client.addresses import check_addr
from mqadmin.client.errors import AdminError
from mqadmin.client.security import ClientSecurity, TlsOptions, credentials_from, using_security
from mqadmin.localcluster.accounts import security_for
from mqadmin.localcluster.namesrvs import namesrv_addrs
from mqadmin.localcluster.processes import make_state_dir
from mqadmin.localcluster.state import ClusterError, default_dir

NamesrvOpt = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDR",
                          help="NameServer(s), 'host:port;host:port' (default: $NAMESRV_ADDR, else the local cluster).")
JsonOpt = typer.Option(False, "--json", help="Print JSON (shapes in docs/mqadmin.md) instead of text.")
TimeoutOpt = typer.Option(3.0, "--timeout", min=0.05, help="Seconds to wait for each server.")

#: Typer/Click settings of every mqadmin command group: -h as well as --help, and help laid out for
#: the terminal's real width (Click's default caps it at 80 and cuts command summaries with "...").
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "max_content_width": 250}


def command_group(help: str) -> typer.Typer:
    """A Typer app or command group with mqadmin's settings: -h, plain help text, no tracebacks of its own
    (errors are one line, shown by the entry point), and help when called without a command."""
    return typer.Typer(add_completion=False, context_settings=CONTEXT_SETTINGS, pretty_exceptions_enable=False,
                       rich_markup_mode=None, no_args_is_help=True, help=help)

#: Apache's TopicValidator and Validators.checkGroup: the characters of a topic or group name, and their
#: longest lengths. Checked before anything is sent, in every command that takes a name.
NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
TOPIC_MAX_LENGTH, GROUP_MAX_LENGTH = 127, 255

#: Each option name of the command being run -> the spelling of it the user typed (``-g`` ->
#: ``--groupName``), set by :func:`mqadmin.cli.main`: an error names an option as it was given.
OPTION_SPELLINGS: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("mqadmin_option_spellings",
                                                                                   default={})


def bad_option(option: str, message: str) -> typer.BadParameter:
    """A usage error naming the option (one line, exit 2), as the user spelled it (``--groupName`` or ``-g``)."""
    return typer.BadParameter(message, param_hint=given_spelling(option))


def given_spelling(option: str) -> str:
    """The spelling of ``option`` (one of its names) the user typed, else ``option`` itself."""
    return OPTION_SPELLINGS.get().get(option, option)


def spellings(names_of_options: list[list[str]], words: list[str]) -> dict[str, str]:
    """For each option (its list of names) given in ``words``, every one of its names -> the one typed
    (the last, when given more than once: the value Click keeps)."""
    found: dict[str, str] = {}
    for names in names_of_options:
        typed = [n for word in words for n in names
                 if word == n or word.startswith(f"{n}=") or (len(n) == 2 and n != word and word.startswith(n))]
        if typed:
            found.update(dict.fromkeys(names, typed[-1]))
    return found


def client_for(namesrv: str | None, timeout: float) -> AdminClient:
    """A client of the NameServers given by ``-n``, else ``$NAMESRV_ADDR``, else the local cluster's (all of them)."""
    if namesrv is not None:
        try:
            return AdminClient(namesrv_addrs(namesrv), timeout=timeout)
        except AdminError as exc:  # a bad option value (``-n ''`` too) is a usage error (exit 2)
            raise bad_option("-n", str(exc)) from None
    return AdminClient(namesrv_addrs(None), timeout=timeout)


def addr_opt(option: str, value: str) -> str:
    """A ``host:port`` option value (a missing port or a port out of range is a usage error)."""
    try:
        return check_addr(value)
    except AdminError as exc:
        raise bad_option(option, str(exc)) from None


def _host_port(ctx: typer.Context, param: Any, value: str | None) -> str | None:
    """Typer callback of every ``host:port`` option: checked while the command line is parsed."""
    if value is None:
        return None
    return addr_opt(param.opts[0], value)


def broker_addr_option(help_text: str, *names: str) -> Any:
    """The ``-b brokerAddr`` option (``host:port``) of every command that takes one: one parser, so
    ``-b 127.0.0.1`` (no port) is the same usage error (exit 2) everywhere."""
    return typer.Option(None, *(names or ("-b", "--brokerAddr")), metavar="HOST:PORT", help=help_text,
                        callback=_host_port)


def one_target(broker_addr: str | None, cluster: str | None) -> None:
    """Apache's ``-b brokerAddr | -c clusterName`` pair: exactly one (Java prints its help otherwise)."""
    if (broker_addr is None) == (cluster is None):
        raise bad_option("-b/-c", "give exactly one of -b brokerAddr or -c clusterName")


def bool_opt(option: str, value: str | None) -> bool | None:
    """Java's ``Boolean.parseBoolean`` options, but a value that is neither true nor false is refused."""
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise bad_option(option, f"{value!r} is not true or false")
    return text == "true"


def time_opt(option: str, text: str) -> int:
    """``now``, milliseconds since the epoch, or local ``yyyy-MM-dd#HH:mm:ss:SSS`` (Apache's forms)."""
    text = text.strip()
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise bad_option(option, f"{text!r} is not now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(moment.timestamp() * 1000)


def topic_opt(topic: str, option: str = "-t") -> str:
    """A topic name as Apache's TopicValidator accepts it."""
    return _name("topic", option, topic, TOPIC_MAX_LENGTH)


def group_opt(group: str, option: str = "-g") -> str:
    """A consumer, producer or subscription group name as Apache's Validators.checkGroup accepts it."""
    return _name("group", option, group, GROUP_MAX_LENGTH)


def _name(what: str, option: str, value: str, longest: int) -> str:
    value = value.strip()
    if not value or len(value) > longest or not NAME_PATTERN.match(value):
        raise bad_option(option, f"{what} {value!r} must be 1-{longest} characters of {NAME_PATTERN.pattern}")
    return value


def _checked_name(check: Callable[[str, str], str]) -> Callable[[typer.Context, Any, Any], Any]:
    """A Typer callback running ``check`` on an option's value (or each of a repeated option's)."""
    def callback(ctx: typer.Context, param: Any, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, (list, tuple)):
            return [check(v, param.opts[0]) for v in value]
        return check(value, param.opts[0])

    return callback


def topic_option(help_text: str, *names: str, default: Any = ..., **kwargs: Any) -> Any:
    """A topic option (``-t`` unless named): its name is checked while the command line is parsed,
    so a name no broker would accept (``a/b``) is a usage error before anything is sent."""
    return typer.Option(default, *(names or ("-t", "--topic")), help=help_text, callback=_checked_name(topic_opt),
                        **kwargs)


def group_option(help_text: str, *names: str, default: Any = ..., **kwargs: Any) -> Any:
    """A group option (``-g`` unless named), checked as :func:`topic_option` is."""
    return typer.Option(default, *(names or ("-g", "--groupName")), help=help_text, callback=_checked_name(group_opt),
                        **kwargs)


def state_dir_option(directory: Path | None) -> Path:
    """``--dir`` for a command that creates the state directory: a usage error (exit 2) if it cannot be one."""
    path = directory if directory is not None else default_dir()
    try:
        make_state_dir(path)
    except ClusterError as exc:
        raise bad_option("--dir", str(exc)) from None
    return path


def check_output(option: str, path: Path | None, suffixes: tuple[str, ...] = ()) -> Path | None:
    """Refuse an output file that cannot be written, before any work is done (a usage error, exit 2).

    Its directory must exist and be writable, the path must not be a directory, and with
    ``suffixes`` its name must end with one of them: a run that took minutes must not end in a
    failed write that loses its result.
    """
    if path is None:
        return None
    if suffixes and path.suffix.lower() not in suffixes:
        raise bad_option(option, f"{path}: the file name must end with one of {', '.join(suffixes)}")
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise bad_option(option, f"cannot write {path}: it is a directory")
    if not parent.is_dir():
        raise bad_option(option, f"cannot write {path}: directory {parent} does not exist")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise bad_option(option, f"cannot write {path}: permission denied")
        return path
    try:  # the only reliable test (root, read-only mounts, /proc): create a file there
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".mqadmin-check-"):
            pass
    except OSError as exc:
        raise bad_option(option, f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def has_module(name: str) -> bool:
    """Whether an optional extra (pyspark, matplotlib) can be imported, without importing it."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# --- signing and TLS: --access-key/--secret-key and --tls on every command that talks to a server ----

AccessKeyOpt = typer.Option(
    None, "--access-key", metavar="AK", envvar="ROCKETMQ_ACCESS_KEY", show_envvar=False,
    help="Sign every request as this account (also $ROCKETMQ_ACCESS_KEY; default: the local cluster's "
         "keys when talking to it, else $ROCKETMQ_HOME/conf/tools.yml).")
SecretKeyOpt = typer.Option(
    None, "--secret-key", metavar="SK", envvar="ROCKETMQ_SECRET_KEY", show_envvar=False,
    help="The account's secret key (better in $ROCKETMQ_SECRET_KEY or tools.yml: other users can read a command line).")
UnsignedOpt = typer.Option(
    False, "--unsigned", envvar="MQADMIN_UNSIGNED", show_envvar=False,
    help="Send every request unsigned, even to a local cluster started with --auth (also $MQADMIN_UNSIGNED=1): "
         "what a client without keys gets.")
TlsOpt = typer.Option(
    False, "--tls", help="Connect with TLS, as a Java client with -Dtls.enable=true: the server's certificate is not "
                         "checked unless --tls-trust-cert is given (default: on for a local cluster started with --tls).")
TlsTrustOpt = typer.Option(
    None, "--tls-trust-cert", metavar="PEM", help="Connect with TLS, only to servers whose certificate chain this "
                                                  "PEM file anchors (implies --tls).")

#: The options :func:`signing` adds: parameter name -> (typer option, annotation).
SECURITY_OPTIONS: dict[str, tuple[Any, Any]] = {
    "access_key": (AccessKeyOpt, str | None), "secret_key": (SecretKeyOpt, str | None), "unsigned": (UnsignedOpt, bool),
    "tls": (TlsOpt, bool), "tls_trust_cert": (TlsTrustOpt, Path | None),
}


def _tls_given(tls: bool, trust_cert: Path | None) -> TlsOptions | None:
    """``--tls``/``--tls-trust-cert`` as options (None: neither); a trust file that cannot be read is a usage error."""
    if trust_cert is None:
        return TlsOptions() if tls else None
    if not trust_cert.is_file():
        raise bad_option("--tls-trust-cert", f"{trust_cert} is not a readable file")
    options = TlsOptions(str(trust_cert.resolve()))
    try:
        options.context()
    except AdminError as exc:
        raise bad_option("--tls-trust-cert", str(exc)) from None
    return options


def signing(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with the ``--access-key``/``--secret-key`` and ``--tls`` options: the keys and
    the channel are resolved once (:func:`~mqadmin.localcluster.accounts.security_for`) and every
    client the command builds signs and connects that way, without the command itself knowing."""
    sig = inspect.signature(command, eval_str=True)

    @functools.wraps(command)
    def signed(*args: Any, access_key: str | None = None, secret_key: str | None = None, unsigned: bool = False,
               tls: bool = False, tls_trust_cert: Path | None = None, **kwargs: Any) -> Any:
        try:
            given = credentials_from(access_key, secret_key)
        except ValueError as exc:
            raise bad_option("--access-key/--secret-key", str(exc)) from None
        if unsigned and given is not None:
            raise bad_option("--unsigned", "sends no signature: it cannot go with --access-key/--secret-key "
                                           "(or $ROCKETMQ_ACCESS_KEY/$ROCKETMQ_SECRET_KEY)")
        security = security_for(kwargs.get("namesrv"), given, kwargs.get("directory"),
                                tls=_tls_given(tls, tls_trust_cert))
        if unsigned:  # no keys, whatever the local cluster or tools.yml would give; TLS as it would be
            security = ClientSecurity(tls=security.tls)
        with using_security(security):
            return command(*args, **kwargs)

    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=annotation)
             for name, (opt, annotation) in SECURITY_OPTIONS.items()]
    signed.__signature__ = sig.replace(parameters=[*sig.parameters.values(), *extra])  # type: ignore[attr-defined]
    signed.__annotations__ = {**command.__annotations__,
                              **{name: annotation for name, (_, annotation) in SECURITY_OPTIONS.items()}}
    return signed


def add_signing(app: typer.Typer) -> None:
    """Give every command of ``app`` that talks to servers (it takes ``-n``) the signing options."""
    for info in app.registered_commands:
        if info.callback is not None and "namesrv" in inspect.signature(info.callback).parameters:
            info.callback = signing(info.callback)
