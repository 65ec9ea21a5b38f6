"""The local cluster's TLS (``mqadmin start --tls``): a certificate made for it, and the keys that
put every process in enforcing mode.

``start --tls`` writes a new self-signed certificate and its key (EC P-256, valid for 127.0.0.1 and
localhost) into ``<dir>/conf/tls/``: the key 0600 in a 0700 directory, new at every start. Every
NameServer and broker stub then runs ``tls.server.mode=enforcing`` with that certificate (a
plaintext client is turned away at its first bytes), not in Java's test mode, and a broker connects
to the NameServers (and a slave to its master) over TLS, checking their certificate against the same
file, as a Java broker does with ``tls.client.authServer=true``. mqadmin commands to the cluster
use TLS and trust that file; other clients can trust it too (``--tls-trust-cert``, or Java's
``tls.client.trustCertPath``).
"""

from __future__ import annotations

from pathlib import Path

from mqadmin.client.security import TlsOptions, write_private
from mqadmin.localcluster.state import ClusterError, ClusterState


def tls_dir(state_dir: Path) -> Path:
    return state_dir / "conf" / "tls"


def cert_path(state_dir: Path) -> Path:
    return tls_dir(state_dir) / "cert.pem"


def key_path(state_dir: Path) -> Path:
    return tls_dir(state_dir) / "key.pem"


def create_certificate(state_dir: Path) -> Path:
    """A new certificate and key for a cluster about to start in ``state_dir``; returns the certificate's path."""
    from security.tls_context import self_signed_pem

    directory = tls_dir(state_dir)
    for d in (directory.parent, directory):
        d.mkdir(mode=0o700, exist_ok=True)
        d.chmod(0o700)
    cert_pem, key_pem = self_signed_pem()
    write_private(key_path(state_dir), key_pem.decode("ascii"))
    cert_path(state_dir).write_bytes(cert_pem)
    return cert_path(state_dir)


def tls_props(state_dir: Path | None) -> dict[str, object]:
    """The config keys of a process of a cluster with TLS (none without: ``state_dir`` None)."""
    if state_dir is None:
        return {}
    cert = cert_path(state_dir)
    return {
        "tls.server.mode": "enforcing",
        "tls.test.mode.enable": False,
        "tls.server.certPath": cert,
        "tls.server.keyPath": key_path(state_dir),
        # As a client (a broker to the NameServers, a slave to its master): TLS, checking the server.
        "tls.enable": True,
        "tls.client.authServer": True,
        "tls.client.trustCertPath": cert,
    }


def cluster_tls(state: ClusterState) -> TlsOptions | None:
    """How tools connect to this cluster: TLS trusting its certificate, or None (plain TCP)."""
    if not state.tls:
        return None
    cert = cert_path(Path(state.dir))
    if not cert.is_file():
        raise ClusterError(f"the local cluster in {state.dir} uses TLS, but its certificate {cert} is gone")
    return TlsOptions(str(cert))
