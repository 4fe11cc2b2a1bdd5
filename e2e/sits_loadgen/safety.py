"""Where test traffic may go: loopback, or the project's own local cluster pods.

A project rule, checked in code rather than left to whoever types the URL: load is only
ever sent to 127.0.0.0/8 (or ::1, or the name ``localhost``) or to 10.244.0.0/16, the pod
block of the project's own local cluster. Host names other than ``localhost`` are refused
rather than resolved: a name can resolve anywhere, and may resolve differently by the time
the client connects. The HTTP client is also built without redirects and without proxy
settings from the environment (see ``sender.py``), so the address checked here is the
address connected to.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

LOCAL_CLUSTER_PODS = ipaddress.ip_network("10.244.0.0/16")


class UnsafeTargetError(ValueError):
    """The base URL points somewhere this project never sends load."""


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise UnsafeTargetError(
            f"host {host!r} is not an IP address: give 127.x.x.x, ::1, localhost or a "
            "10.244.x.x pod address (names are not resolved, so they cannot be checked)"
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_allowed_host(host: str) -> bool:
    """Loopback, ``localhost``, or inside 10.244.0.0/16."""
    if host == "localhost":
        return True
    try:
        address = _address(host)
    except UnsafeTargetError:
        return False
    return address.is_loopback or (address.version == 4 and address in LOCAL_CLUSTER_PODS)


def check_target(base_url: str) -> str:
    """Return ``base_url`` when it is an http(s) URL to an allowed host; raise otherwise."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https"):
        raise UnsafeTargetError(f"base URL must be http:// or https://, got {base_url!r}")
    if parts.username is not None or parts.password is not None:
        raise UnsafeTargetError("base URL must not carry credentials (user:password@)")
    host = parts.hostname
    if not host:
        raise UnsafeTargetError(f"base URL has no host: {base_url!r}")
    if host != "localhost":
        _address(host)  # raises, with the reason, for a name
    if not is_allowed_host(host):
        raise UnsafeTargetError(
            f"refusing to send load to {host}: only 127.0.0.0/8, ::1, localhost and the "
            f"local cluster's pods ({LOCAL_CLUSTER_PODS}) are allowed"
        )
    return base_url
