"""SSL contexts for our servers and clients, from Java's TLS settings.

Server: the certificate and key from ``tls.server.certPath``/``keyPath``
(PEM; an encrypted key with ``tls.server.keyPassword``), or in test mode a
self-signed one made by :func:`self_signed_context` (Java's test mode uses
Netty's ``SelfSignedCertificate``). Client certificates are asked for only
when ``tls.server.need.client.auth`` is ``optional`` or ``require``, and are
then verified against ``tls.server.trustCertPath``: Python's ``ssl`` cannot
ask for a certificate and accept any, which is what Java does with
``tls.server.authClient=false``, so that combination is refused at start.

Client: Java's clients do not verify the server in test mode or without
``tls.client.authServer=true``, and never check the host name (Netty's
handler is created without one); :func:`client_context` does the same by
default and verifies the chain against a trust certificate when asked.

Protocols are TLS 1.2 and 1.3 with OpenSSL's default ciphers, which share
ECDHE-AES-GCM suites (1.2) and the 1.3 suites with the JDK's provider that
Java clients use. Renegotiation is refused (a peer could make the server
repeat handshakes on one connection).

Every file error becomes one :class:`TlsConfigError` line naming the key and path.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile

from security.tls_config import TlsConfigError, TlsSettings
from server_runtime.tls_gate import DISABLED, TlsGate

#: Common name of the test-mode certificate (Netty's SelfSignedCertificate uses "localhost" too).
SELF_SIGNED_NAME = "localhost"
SELF_SIGNED_DAYS = 3650


def _file_error(key: str, path: str, exc: BaseException) -> TlsConfigError:
    if isinstance(exc, FileNotFoundError):
        return TlsConfigError(f"{key} {path} does not exist")
    if isinstance(exc, ssl.SSLError):
        return TlsConfigError(f"{key} {path}: not a usable PEM certificate or key ({exc.reason or exc})")
    return TlsConfigError(f"{key} {path}: {getattr(exc, 'strerror', None) or exc}")


def _load_chain(ctx: ssl.SSLContext, side: str, cert: str, key: str, password: str) -> None:
    if not cert or not key:
        missing = f"tls.{side}.certPath" if not cert else f"tls.{side}.keyPath"
        raise TlsConfigError(f"{missing} is not set (both tls.{side}.certPath and tls.{side}.keyPath are needed)")
    for name, path in ((f"tls.{side}.certPath", cert), (f"tls.{side}.keyPath", key)):
        if not os.path.isfile(path):
            raise _file_error(name, path, FileNotFoundError(path))
    try:
        ctx.load_cert_chain(cert, key, password or None)
    except ssl.SSLError as exc:
        # OpenSSL does not say which file; "key values mismatch" and a wrong password are the usual ones.
        raise TlsConfigError(
            f"tls.{side}.certPath {cert} / tls.{side}.keyPath {key}: cannot be used together "
            f"({exc.reason or exc}; is tls.{side}.keyPassword right?)"
        ) from None
    except OSError as exc:
        raise _file_error(f"tls.{side}.certPath", cert, exc) from None


def _load_trust(ctx: ssl.SSLContext, key: str, path: str) -> None:
    if not os.path.isfile(path):
        raise _file_error(key, path, FileNotFoundError(path))
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise _file_error(key, path, exc) from None


def _base_server_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.options |= ssl.OP_NO_RENEGOTIATION | ssl.OP_NO_COMPRESSION
    return ctx


def server_context(settings: TlsSettings) -> ssl.SSLContext | None:
    """The server context, or None when it is to be generated (test mode, no certificate given)."""
    if settings.self_signed:
        return None
    ctx = _base_server_context()
    _load_chain(ctx, "server", settings.server_cert_path, settings.server_key_path, settings.server_key_password)
    _client_auth(ctx, settings)
    return ctx


def _client_auth(ctx: ssl.SSLContext, settings: TlsSettings) -> None:
    need = settings.server_need_client_auth
    if need == "none" or settings.test_mode:
        return
    if not settings.server_auth_client or not settings.server_trust_cert_path:
        raise TlsConfigError(
            f"tls.server.need.client.auth={need} needs tls.server.authClient=true and tls.server.trustCertPath "
            "(client certificates are always verified here)"
        )
    _load_trust(ctx, "tls.server.trustCertPath", settings.server_trust_cert_path)
    ctx.verify_mode = ssl.CERT_REQUIRED if need == "require" else ssl.CERT_OPTIONAL


def self_signed_pem(name: str = SELF_SIGNED_NAME) -> tuple[bytes, bytes]:
    """A new EC P-256 key and a self-signed certificate for it (PEM), valid for loopback names.

    EC rather than Netty's RSA 2048: generated in about a millisecond instead
    of a few hundred, and cheaper per handshake; every JDK since 7 and Go's
    crypto/tls accept it.
    """
    from cryptography import x509  # imported here: about a second on a busy machine, paid only when used
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    alt_names = x509.SubjectAlternativeName(
        [
            x509.DNSName(name),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=SELF_SIGNED_DAYS))
        .add_extension(alt_names, critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def self_signed_context() -> ssl.SSLContext:
    """A server context with a new self-signed certificate (blocking: run it in a worker thread).

    ``ssl`` loads certificates only from files, so the PEM goes through a
    private temporary directory that is removed at once.
    """
    cert_pem, key_pem = self_signed_pem()
    ctx = _base_server_context()
    with tempfile.TemporaryDirectory(prefix="rmq-tls-") as tmp:
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        for path, data in ((cert, cert_pem), (key, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        ctx.load_cert_chain(cert, key)
    return ctx


def client_context(
    *,
    verify: bool = False,
    trust_cert_path: str = "",
    cert_path: str = "",
    key_path: str = "",
    key_password: str = "",
    check_hostname: bool = False,
) -> ssl.SSLContext:
    """A client context; by default like a Java client in test mode (no verification).

    ``verify``: check the server's chain against ``trust_cert_path`` (or the
    system's CAs without one); ``check_hostname`` also matches its name,
    which Java's clients never do. ``cert_path``/``key_path``: our own
    certificate, for servers that ask for one.
    """
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = verify and check_hostname
    if verify:
        ctx.verify_mode = ssl.CERT_REQUIRED
        if trust_cert_path:
            _load_trust(ctx, "tls.client.trustCertPath", trust_cert_path)
        else:
            ctx.load_default_certs()
    else:
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path or key_path:
        _load_chain(ctx, "client", cert_path, key_path, key_password)
    return ctx


def client_context_from(settings: TlsSettings) -> ssl.SSLContext:
    """The client context a Java process would build from the same keys (TlsHelper, forClient)."""
    return client_context(
        verify=not settings.test_mode and settings.client_auth_server,
        trust_cert_path=settings.client_trust_cert_path,
        cert_path="" if settings.test_mode else settings.client_cert_path,
        key_path="" if settings.test_mode else settings.client_key_path,
        key_password=settings.client_key_password,
    )


__all__ = ["client_context", "client_context_from", "self_signed_context", "self_signed_pem", "server_context"]


def server_gate(settings: TlsSettings) -> TlsGate:
    """What a server's port accepts under ``settings`` (``tls.server.mode``).

    The configured certificate is loaded now, so a bad file is a start-up
    error; a test-mode one is made on the first TLS connection.
    """
    context = server_context(settings) if settings.server_mode != DISABLED else None
    return TlsGate(settings.server_mode, context, make_context=self_signed_context)
