"""HTTP(S) health probes against the local components, with the cluster's own CA.

Plain ``urllib`` instead of ``kubectl get --raw``: a probe is polled every 100-250 ms during
start-up, and forking kubectl each time would cost more than the apiserver's start.
"""

from __future__ import annotations

import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from .pki import PkiPaths


def client_context(pki: PkiPaths) -> ssl.SSLContext:
    """Trusts only our CA and presents the admin cert (needed for the apiserver's /readyz)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return ctx


def probe(url: str, ctx: ssl.SSLContext | None, timeout: float = 2.0) -> tuple[bool, str]:
    """GET ``url``; (True, body) on HTTP 200, else (False, a one-line reason)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=ctx) as resp:
            body = resp.read(4096).decode(errors="replace")
            return resp.status == 200, body.strip()
    except urllib.error.HTTPError as err:
        body = err.read(4096).decode(errors="replace")
        return False, f"HTTP {err.code}: {body.strip()[-400:]}"
    except (urllib.error.URLError, OSError) as err:
        return False, str(getattr(err, "reason", err))


def wait_until(
    check: Callable[[], tuple[bool, str]],
    timeout: float,
    interval: float = 0.2,
    alive: Callable[[], bool] | None = None,
) -> tuple[bool, str]:
    """Poll ``check`` until it passes, ``timeout`` runs out, or ``alive()`` turns False.

    ``alive`` lets a crashed process fail the wait at once instead of after the full timeout.
    Returns the last (ok, detail).
    """
    deadline = time.monotonic() + timeout
    ok, detail = check()
    while not ok and time.monotonic() < deadline:
        if alive is not None and not alive():
            return False, f"process exited ({detail})"
        time.sleep(interval)
        ok, detail = check()
    return ok, detail
