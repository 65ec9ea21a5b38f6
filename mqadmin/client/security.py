"""How the admin client proves who it is and guards the channel: the keys it signs with, and TLS.

A :class:`ClientSecurity` travels with every client (:class:`~mqadmin.client.core.ClientCore`
takes one); a client built without one takes the value of the context it is built in, which the
command line sets once per command (:func:`using_security`), so that every client a command builds,
however deep, signs the same way. Scripts pass it explicitly, or leave it out to send unsigned.

Apache's ``mqadmin`` reads its keys from ``$ROCKETMQ_HOME/conf/tools.yml`` (``accessKey``,
``secretKey``); :func:`read_tools_yml` reads that file the same way, except that a file which
exists but gives only one of the two keys, or is not YAML, is an error here (Java logs it and sends
unsigned requests, which the server then refuses with a less helpful message).

TLS (:class:`TlsOptions`) is what a Java client does with ``-Dtls.enable=true``: by default no check
of the server's certificate (Java's ``tls.test.mode.enable``), or, with a trusted certificate file,
only servers whose chain it anchors. Host names are never checked, as in Java's clients.
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import yaml

from mqadmin.client.errors import AdminError
from remoting.acl import Credentials

#: Where Apache's mqadmin looks for its keys, under ``$ROCKETMQ_HOME``.
TOOLS_YML = Path("conf") / "tools.yml"
#: A tools.yml is a few lines; anything larger is not one.
TOOLS_YML_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class TlsOptions:
    """Connections speak TLS; with ``trust_cert`` (a PEM file), only to servers whose chain it anchors."""

    trust_cert: str = ""

    def context(self) -> ssl.SSLContext:
        """The client context (built once per process; AdminError for a trust file that cannot be used)."""
        return _client_context(self.trust_cert)

    def describe(self) -> str:
        return f"TLS, trusting {self.trust_cert}" if self.trust_cert else "TLS (server certificate not checked)"


@functools.lru_cache(maxsize=8)
def _client_context(trust_cert: str) -> ssl.SSLContext:
    from security.tls_config import TlsConfigError
    from security.tls_context import client_context

    try:
        return client_context(verify=bool(trust_cert), trust_cert_path=trust_cert)
    except TlsConfigError as exc:
        raise AdminError(str(exc)) from None


@dataclass(frozen=True)
class ClientSecurity:
    """What every connection of a client does beyond plain TCP: sign its requests with
    ``credentials``, and speak TLS when ``tls`` is set.

    Small and picklable: the fan-out ships it to its workers (each builds its own TLS context).
    """

    credentials: Credentials | None = None
    #: Where the keys came from, for messages ("--access-key", "tools.yml at ...", "the local cluster").
    source: str = ""
    tls: TlsOptions | None = None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context connections use, or None for plain TCP."""
        return self.tls.context() if self.tls is not None else None

    def describe(self) -> str:
        """One phrase for a log line or a report: never the secret."""
        if self.credentials is None:
            signed = "unsigned"
        else:
            signed = f"signed as {self.credentials.access_key}" + (f" ({self.source})" if self.source else "")
        return signed if self.tls is None else f"{signed}, {self.tls.describe()}"


UNSIGNED = ClientSecurity()

_current: ContextVar[ClientSecurity] = ContextVar("mqadmin_client_security", default=UNSIGNED)


def current_security() -> ClientSecurity:
    """The security a client built now without one gets (:data:`UNSIGNED` unless a command set it)."""
    return _current.get()


@contextmanager
def using_security(security: ClientSecurity) -> Iterator[ClientSecurity]:
    """Clients built inside the block (without an explicit one) use ``security``."""
    token = _current.set(security)
    try:
        yield security
    finally:
        _current.reset(token)


def credentials_from(access_key: str | None, secret_key: str | None) -> Credentials | None:
    """Keys given as a pair (options, environment, a file): both, or neither; ValueError naming the one missing."""
    access_key = (access_key or "").strip()
    secret_key = (secret_key or "").strip()
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        given, missing = ("an access key", "a secret key") if access_key else ("a secret key", "an access key")
        raise ValueError(f"{given} without {missing}: give both or neither")
    return Credentials(access_key, secret_key)


def tools_yml_path(env: Mapping[str, str] | None = None) -> Path | None:
    """``$ROCKETMQ_HOME/conf/tools.yml``, where Apache's mqadmin reads its keys (None without ROCKETMQ_HOME)."""
    home = (os.environ if env is None else env).get("ROCKETMQ_HOME", "").strip()
    return Path(home) / TOOLS_YML if home else None


def read_tools_yml(path: Path) -> Credentials | None:
    """The ``accessKey``/``secretKey`` of a tools.yml; None when the file does not exist or names neither."""
    try:
        with path.open("rb") as fh:
            data = fh.read(TOOLS_YML_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AdminError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > TOOLS_YML_MAX_BYTES:
        raise AdminError(f"{path} is larger than {TOOLS_YML_MAX_BYTES} bytes: not a tools.yml")
    try:
        # BaseLoader: every value a string, as written (a secret 012345 stays 012345)
        doc = yaml.load(data.decode("utf-8"), Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))  # noqa: S506
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise AdminError(f"{path} is not a YAML file: {str(exc).splitlines()[0]}") from None
    if doc in (None, ""):
        return None
    if not isinstance(doc, dict):
        raise AdminError(f"{path}: expected accessKey: ... and secretKey: ...")
    access_key, secret_key = doc.get("accessKey"), doc.get("secretKey")
    if not isinstance(access_key, str | None) or not isinstance(secret_key, str | None):
        raise AdminError(f"{path}: accessKey and secretKey must be plain values")
    try:
        return credentials_from(access_key, secret_key)
    except ValueError as exc:
        raise AdminError(f"{path}: {exc}") from None


def write_tools_yml(path: Path, credentials: Credentials) -> None:
    """A tools.yml with these keys, readable by its owner only (0600 from the start, never wider)."""
    def quoted(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    text = f"accessKey: {quoted(credentials.access_key)}\nsecretKey: {quoted(credentials.secret_key)}\n"
    write_private(path, text)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` with mode 0600 (a secret is never readable by others, even briefly).

    Written to a new file that is renamed over ``path``: a reader (a server reloading its accounts)
    never sees half of it.
    """
    tmp = path.with_name(f".{path.name}.new")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o600)  # the umask cannot widen 0600, but an odd filesystem might ignore the mode
    os.replace(tmp, path)
