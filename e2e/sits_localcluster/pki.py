"""Certificates and keys for the local control plane, and the admin kubeconfig.

Why our own PKI instead of ``--insecure-port`` or anonymous access: the operator must be
tested against a cluster that authenticates and authorizes (RBAC) like a real one, and the
insecure port no longer exists. Everything is generated once per state directory and kept,
so that a restarted cluster still accepts kubeconfigs handed out earlier.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from . import network

CertKey = tuple[ec.EllipticCurvePrivateKey, x509.Certificate]

#: Names the apiserver answers to: loopback plus the in-cluster service names.
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
#: Loopback for the host's clients, the ``kubernetes`` Service's ClusterIP and the node IP
#: it leads to, for in-cluster clients (pods on the real node).
SERVING_IPS = ("127.0.0.1", network.KUBERNETES_SERVICE_IP, network.NODE_IP)
ADMIN_USER = "sits-admin"
ADMIN_GROUP = "system:masters"
VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class PkiPaths:
    """Where each PEM file of the cluster lives (all under ``<state>/pki``)."""

    root: Path

    @property
    def ca_cert(self) -> Path:
        return self.root / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.root / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.root / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.root / "serving.key"

    @property
    def admin_cert(self) -> Path:
        return self.root / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.root / "admin.key"

    @property
    def sa_key(self) -> Path:
        return self.root / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.root / "sa.pub"

    def all_files(self) -> list[Path]:
        """Every file :func:`ensure_pki` writes; all present means nothing to do."""
        return [
            self.ca_cert,
            self.ca_key,
            self.serving_cert,
            self.serving_key,
            self.admin_cert,
            self.admin_key,
            self.sa_key,
            self.sa_pub,
        ]


def _new_key() -> ec.EllipticCurvePrivateKey:
    """P-256: fast to generate (RSA would add ~0.5 s per key on 2 cores), accepted by k8s."""
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    attrs += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    return x509.Name(attrs)


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    """Back-date by an hour so that small clock differences never make a cert not-yet-valid."""
    now = dt.datetime.now(dt.UTC)
    return builder.not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + VALIDITY)


def make_ca(common_name: str = "sits-local-ca") -> CertKey:
    """A self-signed CA that signs every other cert and is the client CA of the apiserver."""
    key = _new_key()
    name = _name(common_name)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    return key, _validity(builder).sign(key, hashes.SHA256())


def issue_cert(
    ca: CertKey,
    common_name: str,
    *,
    organizations: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
) -> CertKey:
    """A leaf cert signed by ``ca``; ``organizations`` become Kubernetes groups for clients."""
    ca_key, ca_cert = ca
    key = _new_key()
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, _validity(builder).sign(ca_key, hashes.SHA256())


def key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    """Unencrypted PKCS#8 PEM, the form every Kubernetes binary reads."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _write(path: Path, data: bytes, private: bool) -> None:
    path.write_bytes(data)
    path.chmod(0o600 if private else 0o644)


def _write_pair(paths: tuple[Path, Path], pair: CertKey) -> None:
    cert_path, key_path = paths
    _write(cert_path, cert_pem(pair[1]), private=False)
    _write(key_path, key_pem(pair[0]), private=True)


def ensure_pki(root: Path) -> PkiPaths:
    """Generate the CA, serving, admin and service-account keys unless all already exist.

    A partial set (an interrupted earlier run) is regenerated as a whole, because a leaf
    signed by a CA that is gone would be useless.
    """
    paths = PkiPaths(root)
    if all(p.is_file() for p in paths.all_files()):
        if not _serving_ips_current(paths):
            ca = load_ca(paths)
            serving = issue_cert(
                ca, "kube-apiserver", dns_names=SERVING_DNS_NAMES, ips=SERVING_IPS, server=True
            )
            _write_pair((paths.serving_cert, paths.serving_key), serving)
        return paths
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o700)
    ca = make_ca()
    serving = issue_cert(
        ca, "kube-apiserver", dns_names=SERVING_DNS_NAMES, ips=SERVING_IPS, server=True
    )
    admin = issue_cert(ca, ADMIN_USER, organizations=(ADMIN_GROUP,), client=True)
    # The service-account signer is RSA: RS256 is what every client library verifies.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_pub = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_pair((paths.ca_cert, paths.ca_key), ca)
    _write_pair((paths.serving_cert, paths.serving_key), serving)
    _write_pair((paths.admin_cert, paths.admin_key), admin)
    _write(paths.sa_key, key_pem(sa_key), private=True)
    _write(paths.sa_pub, sa_pub, private=False)
    return paths


def _serving_ips_current(paths: PkiPaths) -> bool:
    """Whether the serving cert names every address in :data:`SERVING_IPS`.

    A state directory from before the address plan changed keeps its CA (and so every
    kubeconfig handed out), and only the serving cert is issued again.
    """
    cert = x509.load_pem_x509_certificate(paths.serving_cert.read_bytes())
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have = {str(ip) for ip in san.get_values_for_type(x509.IPAddress)}
    return set(SERVING_IPS) <= have


def load_ca(paths: PkiPaths) -> CertKey:
    """The cluster CA from its PEM files, to sign more leaves (node and kube-proxy)."""
    key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{paths.ca_key} is not an EC key")
    return key, x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())


def write_client_kubeconfig(
    paths: PkiPaths, server: str, target: Path, user: str, groups: tuple[str, ...] = ()
) -> Path:
    """A kubeconfig for ``user`` (in ``groups``) with a fresh client cert from the cluster CA.

    The node's kubelet is ``system:node:<name>`` in ``system:nodes`` (so the Node
    authorizer and NodeRestriction apply to it) and kube-proxy is ``system:kube-proxy``
    (bound to ``system:node-proxier`` by default), as on a kubeadm node.
    """
    if target.is_file():
        return target
    key, cert = issue_cert(load_ca(paths), user, organizations=groups, client=True)
    text = render_kubeconfig(server, paths.ca_cert.read_bytes(), cert_pem(cert), key_pem(key))
    target.parent.mkdir(parents=True, exist_ok=True)
    _write(target, text.encode("utf-8"), private=True)
    return target


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def render_kubeconfig(
    server: str, ca_pem: bytes, client_cert_pem: bytes, client_key_pem: bytes, name: str = "sits"
) -> str:
    """A self-contained kubeconfig (data embedded) so that it can be copied anywhere."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": f"{name}-admin",
                "user": {
                    "client-certificate-data": _b64(client_cert_pem),
                    "client-key-data": _b64(client_key_pem),
                },
            }
        ],
        "contexts": [
            {
                "name": name,
                "context": {"cluster": name, "user": f"{name}-admin", "namespace": "default"},
            }
        ],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_admin_kubeconfig(paths: PkiPaths, server: str, target: Path) -> Path:
    """Render the admin kubeconfig from the PKI files and write it (mode 0600)."""
    text = render_kubeconfig(
        server,
        paths.ca_cert.read_bytes(),
        paths.admin_cert.read_bytes(),
        paths.admin_key.read_bytes(),
    )
    _write(target, text.encode("utf-8"), private=True)
    return target
