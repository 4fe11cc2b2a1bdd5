"""A real Prometheus that requires TLS, a client certificate and basic auth, as a
production one behind its own web configuration (--web.config.file) does.

Its certificate is valid for SERVER_NAME only, not for 127.0.0.1, so a client must set
the TLS server name; a second CA that signed nothing the server holds stands in for a
wrong CA bundle. Used by tests/integration/test_prometheus_access.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import bcrypt
import yaml

from sits_localcluster.pki import cert_pem, issue_cert, key_pem, make_ca
from sits_localcluster.prometheus import LocalPrometheus

SERVER_NAME = "prometheus.sits.test"
USERNAME = "sits-operator"


@dataclass(frozen=True)
class Credentials:
    """The PEMs and password a client needs, and a wrong CA."""

    ca: str
    client_cert: str
    client_key: str
    other_ca: str
    password: str


def _private(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def web_config(workdir: Path, password: str) -> tuple[Path, Credentials]:
    """Writes the server's certificates and web configuration; returns its path and what
    a client needs."""
    workdir.mkdir(parents=True, exist_ok=True)
    ca = make_ca("sits-test-prometheus-ca")
    server = issue_cert(ca, SERVER_NAME, dns_names=(SERVER_NAME,), server=True)
    client = issue_cert(ca, USERNAME, client=True)
    other_ca = make_ca("sits-test-unrelated-ca")
    files = {
        "ca": _private(workdir / "ca.crt", cert_pem(ca[1])),
        "cert": _private(workdir / "server.crt", cert_pem(server[1])),
        "key": _private(workdir / "server.key", key_pem(server[0])),
    }
    config = {
        "tls_server_config": {
            "cert_file": str(files["cert"]),
            "key_file": str(files["key"]),
            "client_auth_type": "RequireAndVerifyClientCert",
            "client_ca_file": str(files["ca"]),
        },
        # bcrypt at its cheapest cost: every request is checked (Prometheus caches it).
        "basic_auth_users": {
            USERNAME: bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()
        },
    }
    path = workdir / "web.yml"
    path.write_text(yaml.safe_dump(config))
    credentials = Credentials(
        ca=cert_pem(ca[1]).decode(),
        client_cert=cert_pem(client[1]).decode(),
        client_key=key_pem(client[0]).decode(),
        other_ca=cert_pem(other_ca[1]).decode(),
        password=password,
    )
    return path, credentials


def secured_prometheus(
    workdir: Path, targets: list[str], password: str
) -> tuple[LocalPrometheus, Credentials]:
    """A LocalPrometheus (not started) behind TLS, client certificates and basic auth."""
    config, credentials = web_config(workdir / "web", password)
    return LocalPrometheus(workdir, targets, web_config=config), credentials
