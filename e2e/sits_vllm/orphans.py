"""Bookkeeping so that vLLM servers of a killed test run do not live on.

``VllmServer.stop()`` cleans up after itself, and the pytest plugin stops every server at
session end, even after Ctrl-C. What neither can survive is the test process being
SIGKILLed (a CI timeout, an OOM kill): its servers, each in its own process group, would
keep ~1.5 GiB and a port each. So every started server leaves a record naming its process
group and its owner; ``reap_orphans()`` (run by the plugin before the first start) kills
the groups whose owner is gone.

Records live in the temp dir: they describe processes, which do not outlive a reboot.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
from pathlib import Path

RUN_DIR = Path(tempfile.gettempdir()) / "sits-vllm-run"
VLLM_MARKERS = (b"vllm", b"VLLM")


def record(pgid: int, url: str) -> None:
    """Note that this process owns the vLLM process group ``pgid``."""
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    body = {"pgid": pgid, "owner": os.getpid(), "url": url}
    _path(pgid).write_text(json.dumps(body) + "\n")


def forget(pgid: int) -> None:
    """Drop the record of a group that was stopped properly."""
    _path(pgid).unlink(missing_ok=True)


def reap_orphans() -> list[int]:
    """Kill the vLLM process groups whose owner process has died; return their ids."""
    reaped = []
    for path in sorted(RUN_DIR.glob("vllm-*.json")) if RUN_DIR.exists() else []:
        try:
            entry = json.loads(path.read_text())
            pgid, owner = int(entry["pgid"]), int(entry["owner"])
        except (OSError, ValueError, KeyError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _alive(owner):
            continue
        if _group_runs_vllm(pgid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            reaped.append(pgid)
        path.unlink(missing_ok=True)
    return reaped


def _path(pgid: int) -> Path:
    return RUN_DIR / f"vllm-{pgid}.json"


def _alive(pid: int) -> bool:
    """True if a live process has this pid (a reused pid errs on the safe side).

    A SIGKILLed owner may linger as a zombie until its parent reaps it; that counts as dead.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    return True


def _group_runs_vllm(pgid: int) -> bool:
    """True if some process of group ``pgid`` is a vLLM one: never kill a reused group id."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # Field 5 of /proc/PID/stat is the pgid; split after the ")" ending the name.
            if int(stat.read_bytes().rsplit(b")", 1)[1].split()[2]) != pgid:
                continue
            cmdline = (stat.parent / "cmdline").read_bytes()
            if any(marker in cmdline for marker in VLLM_MARKERS):
                return True
    return False
