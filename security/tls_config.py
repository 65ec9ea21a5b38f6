"""TLS settings under Java RocketMQ's keys (``TlsSystemConfig``), read from a server's config file.

Java reads these keys from system properties (``-Dtls.server.mode=...``)
and then from ``tls.config.file`` (default ``/etc/rocketmq/tls.properties``),
whose values win except for ``tls.server.mode`` and ``tls.enable``. Here
the same keys are accepted in ``namesrv.properties`` or the broker's
properties file, and ``tls.config.file`` is read the same way on top, so an
operator's existing ``tls.properties`` works unchanged.

Defaults are Java's: ``tls.server.mode=permissive`` (TLS and plaintext on
one port) and ``tls.test.mode.enable=true`` (a self-signed certificate on
the server, no verification on the client). Two differences, both to fail
loudly rather than run with something the operator did not ask for:

- an unknown mode or a boolean that is not ``true``/``false`` is a start-up
  error (Java falls back to permissive / false);
- an explicit ``tls.config.file`` that cannot be read is an error (Java
  skips it silently); the default path is read only if it exists.

Pure data: nothing here touches ``ssl`` or sockets (see :mod:`security.tls_context`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass

from remoting import properties
from server_runtime.regular_file import read_regular_text
from server_runtime.tls_gate import DISABLED, ENFORCING, MODES, PERMISSIVE

CLIENT_AUTH_MODES = ("none", "optional", "require")
DEFAULT_CONFIG_FILE = "/etc/rocketmq/tls.properties"
#: The longest tls.config.file read (a properties file of a dozen keys).
MAX_CONFIG_FILE_BYTES = 64 * 1024

#: Java key -> attribute of :class:`TlsSettings`.
KEYS: dict[str, str] = {
    "tls.server.mode": "server_mode",
    "tls.enable": "enable",
    "tls.config.file": "config_file",
    "tls.test.mode.enable": "test_mode",
    "tls.server.need.client.auth": "server_need_client_auth",
    "tls.server.keyPath": "server_key_path",
    "tls.server.keyPassword": "server_key_password",
    "tls.server.certPath": "server_cert_path",
    "tls.server.authClient": "server_auth_client",
    "tls.server.trustCertPath": "server_trust_cert_path",
    "tls.client.keyPath": "client_key_path",
    "tls.client.keyPassword": "client_key_password",
    "tls.client.certPath": "client_cert_path",
    "tls.client.authServer": "client_auth_server",
    "tls.client.trustCertPath": "client_trust_cert_path",
}
#: Keys Java never takes from tls.config.file.
_NOT_FROM_FILE = frozenset({"tls.server.mode", "tls.enable", "tls.config.file"})


class TlsConfigError(ValueError):
    """A TLS setting, certificate or key that cannot be used; the text names it."""


@dataclass
class TlsSettings:
    server_mode: str = PERMISSIVE
    #: None: not set (a broker then uses TLS as a client only when its server mode is enforcing, as Java's does).
    enable: bool | None = None
    config_file: str = ""  # "": Java's default path, read only if it exists
    test_mode: bool = True
    server_need_client_auth: str = "none"
    server_key_path: str = ""
    server_key_password: str = ""
    server_cert_path: str = ""
    server_auth_client: bool = False
    server_trust_cert_path: str = ""
    client_key_path: str = ""
    client_key_password: str = ""
    client_cert_path: str = ""
    client_auth_server: bool = False
    client_trust_cert_path: str = ""

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TlsSettings:
        """The settings in ``props`` (other keys ignored); TlsConfigError names a bad one."""
        settings = cls()
        settings.apply(props)
        settings.validate()
        return settings

    def resolved(self) -> TlsSettings:
        """A copy with ``tls.config.file`` read on top, as a Java process does at start."""
        settings = dataclasses.replace(self)
        settings.apply(self._config_file_properties(), from_file=True)
        settings.validate()
        return settings

    def apply(self, props: Mapping[str, str], *, from_file: bool = False) -> None:
        types = {f.name: f.type for f in dataclasses.fields(self)}
        for key, text in props.items():
            attr = KEYS.get(key)
            if attr is None or (from_file and key in _NOT_FROM_FILE):
                continue
            value: object = text.strip()
            if types[attr] in (bool, "bool", "bool | None"):
                lowered = text.strip().lower()
                if lowered not in ("true", "false"):
                    raise TlsConfigError(f"{key}={text!r} is not true or false")
                value = lowered == "true"
            setattr(self, attr, value)

    def _config_file_properties(self) -> dict[str, str]:
        path = self.config_file or DEFAULT_CONFIG_FILE
        if not self.config_file and not os.path.isfile(path):
            return {}
        try:  # a regular file of bounded size: a FIFO here would block the start
            text = read_regular_text(path, MAX_CONFIG_FILE_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            raise TlsConfigError(f"tls.config.file {path}: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            return properties.loads(text)
        except properties.PropertiesError as exc:
            raise TlsConfigError(f"tls.config.file {path}: {exc}") from None

    def validate(self) -> None:
        self.server_mode = self.server_mode.lower()
        if self.server_mode not in MODES:
            raise TlsConfigError(f"tls.server.mode={self.server_mode!r} is not one of {', '.join(MODES)}")
        self.server_need_client_auth = self.server_need_client_auth.lower() or "none"
        if self.server_need_client_auth not in CLIENT_AUTH_MODES:
            raise TlsConfigError(
                f"tls.server.need.client.auth={self.server_need_client_auth!r} "
                f"is not one of {', '.join(CLIENT_AUTH_MODES)}"
            )

    # ------------------------------------------------------------------

    @property
    def client_tls(self) -> bool:
        """Whether this process's own client connections use TLS (Java's ``useTLS`` default)."""
        return self.enable if self.enable is not None else self.server_mode == ENFORCING

    @property
    def self_signed(self) -> bool:
        """The server uses a certificate generated at start (test mode and no certificate given).

        Java's test mode ignores ``tls.server.certPath``; here a certificate
        given explicitly is used even in test mode (clients in test mode do not
        verify it, so they connect either way).
        """
        return self.test_mode and not (self.server_cert_path or self.server_key_path)


def is_tls_key(key: str) -> bool:
    return key in KEYS


def is_secret_key(key: str) -> bool:
    """Keys whose values a config listing must not show (key passwords)."""
    return key.lower().endswith("password")


__all__ = [
    "DISABLED",
    "ENFORCING",
    "KEYS",
    "MODES",
    "PERMISSIVE",
    "TlsConfigError",
    "TlsSettings",
    "is_secret_key",
    "is_tls_key",
]
