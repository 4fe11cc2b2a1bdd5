"""Background processes that outlive the Python process that started them.

Why a detached launcher rather than keeping ``subprocess.Popen`` objects: the cluster must
survive ``sits-cluster up`` exiting, and a Popen object that is garbage collected while its
child still runs emits a ``ResourceWarning`` (an error under ``filterwarnings = error``).
A short-lived helper interpreter starts the component in its own session and exits, so the
component is re-parented to init and nobody here has to reap it. Liveness is then judged
from ``/proc``: a pid is ours only if its command line still names the same binary, which
guards against pid reuse after a reboot or a crash.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_LAUNCHER = """
import subprocess, sys
log = open(sys.argv[1], "ab", buffering=0)
proc = subprocess.Popen(
    sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
    start_new_session=True, close_fds=True,
)
print(proc.pid)
"""


def spawn_detached(argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` in a new session with output appended to ``log_path``; return its pid."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"\n===== {stamp} starting: {' '.join(argv)}\n".encode())
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(log_path), *argv],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return int(out.stdout.strip())


def _proc_state(pid: int) -> str | None:
    """The one-letter state from ``/proc/<pid>/stat``, or None when there is no such pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    return stat.rsplit(")", 1)[1].split()[0]


def cmdline(pid: int) -> list[str]:
    """The argv of a live process, or [] when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (whatever it runs)."""
    return _proc_state(pid) not in (None, "Z", "X")


def is_running(pid: int | None, binary: Path) -> bool:
    """True when ``pid`` is alive, not a zombie, and still runs ``binary``."""
    if pid is None or pid <= 0:
        return False
    if not pid_alive(pid):
        return False
    argv = cmdline(pid)
    return bool(argv) and argv[0] == str(binary)


def read_pid(pid_file: Path) -> int | None:
    """The pid recorded in ``pid_file``, or None when missing or garbled."""
    try:
        return int(pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _signal_group(pid: int, sig: signal.Signals) -> None:
    """Signal the component's whole session (it is the group leader), so children die too."""
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)


def stop(pid: int, binary: Path, timeout: float = 15.0) -> bool:
    """SIGTERM, wait up to ``timeout`` seconds, then SIGKILL. Returns True if it had to kill."""
    if not is_running(pid, binary):
        return False
    _signal_group(pid, signal.SIGTERM)
    if wait_gone(pid, binary, timeout):
        return False
    _signal_group(pid, signal.SIGKILL)
    wait_gone(pid, binary, 5.0)
    return True


def wait_gone(pid: int, binary: Path, timeout: float) -> bool:
    """Poll until ``pid`` no longer runs ``binary``; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not is_running(pid, binary):
            return True
        time.sleep(0.1)
    return not is_running(pid, binary)


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except (FileNotFoundError, PermissionError):
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _decode_addr(hex_addr: str) -> tuple[str, int]:
    """Decode ``/proc/net/tcp{,6}`` ``ADDR:PORT`` (little-endian 32-bit words) to text."""
    addr_hex, port_hex = hex_addr.split(":")
    raw = bytes.fromhex(addr_hex)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(words)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped), int(port_hex, 16)
    return str(ip), int(port_hex, 16)


def listening_sockets(pid: int) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN state that ``pid`` holds open.

    Read from /proc rather than ``ss`` so that the check works where iproute2 is missing.
    """
    inodes = _socket_inodes(pid)
    found: list[tuple[str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except FileNotFoundError:
            continue
        for line in lines:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # 0A = TCP_LISTEN
                found.append(_decode_addr(cols[1]))
    return sorted(set(found))
