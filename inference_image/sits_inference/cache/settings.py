"""Sidecar settings: one frozen value, from ``SITS_CACHE_*`` variables or equivalent flags.

Why both: the operator renders environment variables into the pod (see
``sits_operator.core.render._cache_env``), a person running the sidecar by hand types
flags. A flag wins over its variable. Every value is checked here, at start, and a bad one
stops the sidecar with a message naming the variable (or flag) and what it should be: a
sidecar that silently fell back to a default would cache with settings nobody asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ENV_PREFIX = "SITS_CACHE_"
STATS_FILE = "vector-index-stats.json"

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^(\d+)(Ki|Mi|Gi|k|M|G)?$")
_SIZE_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "Ki": 1 << 10, "Mi": 1 << 20}
_SIZE_UNITS["Gi"] = 1 << 30
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class SettingsError(ValueError):
    """A setting that cannot be used; the message names its variable or flag."""


@dataclass(frozen=True, slots=True)
class AdapterEntry:
    """One entry of SITS_CACHE_LORA_ADAPTERS, as the operator renders it."""

    name: str
    source: str
    digest: str | None = None
    pinned: bool = False


@dataclass(frozen=True, slots=True)
class SidecarSettings:
    """Everything the sidecar reads at start. ``None`` for a semantic-cache field means
    "the L1 library's default" (chosen from its benchmark curve)."""

    host: str = "127.0.0.1"
    port: int = 8080
    upstream: str = "http://127.0.0.1:8000"
    model: str = ""
    revision: str = ""
    variant: str = ""
    # The request-metric contract's labels (the SitsDeployment's namespace and name).
    namespace: str = ""
    deployment: str = ""
    semantic_enabled: bool = True
    semantic_threshold: float | None = None
    semantic_ttl_s: float = 3600.0
    semantic_max_entries: int | None = None
    semantic_max_bytes: int | None = None
    semantic_non_deterministic: bool = False
    vector_enabled: bool = False
    vector_index: Path | None = None
    vector_hot_min_hits: int = 50
    vector_hot_window_s: float = 3600.0
    lora_max_resident: int = 4
    # vLLM's --max-cpu-loras as the operator renders it (None: equal to lora_max_resident).
    lora_max_cpu_loras: int | None = None
    lora_adapters: tuple[AdapterEntry, ...] = ()
    state_dir: Path | None = None
    max_body_bytes: int = 8 << 20
    connect_timeout_s: float = 5.0
    # Longest silence from vLLM: before its headers, or between two stream chunks.
    upstream_timeout_s: float = 300.0
    health_interval_s: float = 2.0
    # A cached answer stays valid while vLLM restarts (same revision): serve it.
    serve_hits_when_down: bool = True
    # Identical concurrent non-streamed misses wait up to this long for the first one's
    # answer instead of each asking vLLM (coalesce.py); 0 turns that off.
    coalesce_wait_s: float = 300.0
    # L1 lookups run on this many threads (embedding is CPU-bound; more would only
    # compete with each other and with torch's own intra-op threads).
    lookup_workers: int = 2
    # When set, /admin/* needs "Authorization: Bearer <token>".
    admin_token: str | None = None
    log_level: str = "INFO"

    @property
    def vector_stats_path(self) -> Path | None:
        """Where L2 persists its inverted-list access counts (survives sidecar restarts)."""
        return self.state_dir / STATS_FILE if self.state_dir is not None else None


# -- value parsers (each raises ValueError with a short reason) -----------------------------


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration ("1h", "90s", "1h30m", "250ms") or a plain number."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pos, seconds = 0, 0.0
        for match in _DURATION_PART.finditer(value):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
            pos = match.end()
        if pos != len(value) or not value:
            raise ValueError("expected a duration such as 90s, 30m, 1h or 1h30m") from None
    if not seconds > 0:
        raise ValueError("must be greater than zero")
    return seconds


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError("expected true or false")


def parse_threshold(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be between 0 and 1")
    return value


def _positive_int(text: str) -> int:
    value = int(text.strip())
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def parse_size(text: str) -> int:
    """Bytes from "268435456", "256Mi", "1Gi", "500M"."""
    match = _SIZE.match(text.strip())
    if match is None:
        raise ValueError("expected a byte count such as 268435456, 256Mi or 1Gi")
    value = int(match.group(1)) * _SIZE_UNITS[match.group(2)]
    if value < 1:
        raise ValueError("must be at least 1 byte")
    return value


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("expected HOST:PORT, e.g. 0.0.0.0:8080")
    return host.strip("[]"), int(port)


def parse_upstream(text: str) -> str:
    url = text.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http:// URL, e.g. http://127.0.0.1:8000")
    if parts.path or parts.query:
        raise ValueError("give the server's root URL, without a path")
    return url


def parse_adapters(text: str) -> tuple[AdapterEntry, ...]:
    """The JSON list the operator renders: [{"name", "source", "digest"?, "pinned"?}]."""
    if not text.strip():
        return ()
    try:
        items = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not JSON ({err.msg})") from None
    if not isinstance(items, list):
        raise ValueError("expected a JSON list of adapters")
    entries = tuple(_adapter(item, i) for i, item in enumerate(items))
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise ValueError("adapter names must be unique")
    return entries


def _adapter(item: object, index: int) -> AdapterEntry:
    if not isinstance(item, dict):
        raise ValueError(f"item {index} is not an object")
    name, source = item.get("name"), item.get("source")
    if not isinstance(name, str) or not name or not isinstance(source, str) or not source:
        raise ValueError(f"item {index} needs a non-empty string name and source")
    digest, pinned = item.get("digest"), item.get("pinned", False)
    if digest is not None and not isinstance(digest, str):
        raise ValueError(f"item {index}: digest must be a string")
    if not isinstance(pinned, bool):
        raise ValueError(f"item {index}: pinned must be true or false")
    return AdapterEntry(name, source, digest, pinned)


def _optional_path(text: str) -> Path | None:
    return Path(text) if text.strip() else None


def _optional_str(text: str) -> str | None:
    return text or None


def _log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        raise ValueError("expected DEBUG, INFO, WARNING or ERROR")
    return level


# -- the option table -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its variable suffix, its flag, how to parse it, which fields it fills."""

    env: str
    parse: Callable[[str], Any]
    help: str
    field: str = ""

    @property
    def flag(self) -> str:
        return "--" + self.env.lower().replace("_", "-")

    @property
    def variable(self) -> str:
        return ENV_PREFIX + self.env


OPTIONS: tuple[Option, ...] = (
    Option("LISTEN", parse_listen, "HOST:PORT to serve on (default 127.0.0.1:8080)"),
    Option("UPSTREAM", parse_upstream, "vLLM's root URL (default http://127.0.0.1:8000)"),
    Option("MODEL", str, "vLLM's served model name (for stats and logs)"),
    Option("REVISION", str, "model revision; part of every cache partition"),
    Option("VARIANT", str, "the SitsDeployment variant (request metrics, logs)"),
    Option("NAMESPACE", str, "the SitsDeployment's namespace (request metrics)"),
    Option("DEPLOYMENT", str, "the SitsDeployment's name (request metrics)"),
    Option("SEMANTIC_ENABLED", parse_bool, "enable the L1 semantic cache (default true)"),
    Option("SEMANTIC_THRESHOLD", parse_threshold, "cosine similarity for a hit, 0..1"),
    Option("SEMANTIC_TTL", parse_duration, "lifetime of an entry (default 1h)", "semantic_ttl_s"),
    Option("SEMANTIC_MAX_ENTRIES", _positive_int, "most entries held"),
    Option("SEMANTIC_MAX_BYTES", parse_size, "memory cap of the entries, e.g. 256Mi"),
    Option("SEMANTIC_NON_DETERMINISTIC", parse_bool, "also cache sampled requests (default false)"),
    Option("VECTOR_ENABLED", parse_bool, "serve POST /v1/retrieve (L2; default false)"),
    Option("VECTOR_INDEX", _optional_path, "index directory built by sits-index"),
    Option("VECTOR_HOT_MIN_HITS", _positive_int, "list accesses that make a list hot"),
    Option("VECTOR_HOT_WINDOW", parse_duration, "window of list accesses", "vector_hot_window_s"),
    Option("LORA_MAX_RESIDENT", _positive_int, "adapters kept loaded in vLLM (L3)"),
    Option("LORA_MAX_CPU_LORAS", _positive_int, "vLLM's --max-cpu-loras (default: max resident)"),
    Option("LORA_ADAPTERS", parse_adapters, 'JSON list of {"name","source","digest","pinned"}'),
    Option("STATE_DIR", _optional_path, "writable directory for state kept across restarts"),
    Option("MAX_BODY_BYTES", parse_size, "largest inference request body (default 8Mi)"),
    Option("CONNECT_TIMEOUT", parse_duration, "connect timeout to vLLM", "connect_timeout_s"),
    Option("UPSTREAM_TIMEOUT", parse_duration, "longest silence of vLLM", "upstream_timeout_s"),
    Option("HEALTH_INTERVAL", parse_duration, "vLLM health poll period", "health_interval_s"),
    Option("SERVE_HITS_WHEN_DOWN", parse_bool, "answer hits while vLLM is down (default true)"),
    Option(
        "COALESCE_WAIT",
        parse_duration,
        "identical concurrent misses wait this long for the first one's answer (0: off)",
        "coalesce_wait_s",
    ),
    Option("LOOKUP_WORKERS", _positive_int, "threads for L1 lookups (default 2)"),
    Option("ADMIN_TOKEN", _optional_str, "bearer token required by /admin/*"),
    Option("LOG_LEVEL", _log_level, "DEBUG, INFO, WARNING or ERROR"),
)

_FIELDS = frozenset(f.name for f in fields(SidecarSettings))


def _field_of(option: Option) -> str:
    return option.field or option.env.lower()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sits-cache",
        description="The SITS cache sidecar: an OpenAI-compatible proxy in front of vLLM with "
        "an L1 semantic cache, an L2 vector index and L3 LoRA adapter residency.",
        epilog=f"Every flag also reads {ENV_PREFIX}<NAME> (e.g. --semantic-ttl from "
        f"{ENV_PREFIX}SEMANTIC_TTL); a flag wins over its variable.",
    )
    for option in OPTIONS:
        parser.add_argument(option.flag, dest=option.env, default=None, help=option.help)
    return parser


def _convert(option: Option, raw: str, source: str) -> Any:
    try:
        return option.parse(raw)
    except ValueError as err:
        raise SettingsError(f"{source}={raw!r}: {err}") from None


def resolve(values: Mapping[str, tuple[str, str]]) -> SidecarSettings:
    """Settings from raw strings keyed by option env name, each with its source's name."""
    kwargs: dict[str, Any] = {}
    for option in OPTIONS:
        if option.env not in values:
            continue
        raw, source = values[option.env]
        value = _convert(option, raw, source)
        if option.env == "LISTEN":
            kwargs["host"], kwargs["port"] = value
        else:
            kwargs[_field_of(option)] = value
    settings = SidecarSettings(**kwargs)
    _check_combination(settings, values)
    return settings


def _check_combination(settings: SidecarSettings, values: Mapping[str, tuple[str, str]]) -> None:
    if settings.vector_enabled and settings.vector_index is None:
        source = values.get("VECTOR_INDEX", ("", ENV_PREFIX + "VECTOR_INDEX"))[1]
        raise SettingsError(f"{source} must name the index directory when L2 is enabled")
    pinned = sum(1 for a in settings.lora_adapters if a.pinned)
    if pinned > settings.lora_max_resident:
        source = values.get("LORA_MAX_RESIDENT", ("", ENV_PREFIX + "LORA_MAX_RESIDENT"))[1]
        raise SettingsError(
            f"{source}={settings.lora_max_resident}: fewer slots than the {pinned} pinned adapters"
        )


def load_settings(
    argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None
) -> SidecarSettings:
    """Flags first, then ``SITS_CACHE_*`` variables, then defaults; raises SettingsError."""
    environ = os.environ if environ is None else environ
    args = vars(build_parser().parse_args(argv))
    values: dict[str, tuple[str, str]] = {}
    for option in OPTIONS:
        flag_value = args.get(option.env)
        if flag_value is not None:
            values[option.env] = (flag_value, option.flag)
        elif option.variable in environ:
            values[option.env] = (environ[option.variable], option.variable)
    return resolve(values)


def _assert_table_complete() -> None:
    """Every option fills a real field (caught at import, not at a user's start)."""
    for option in OPTIONS:
        if option.env != "LISTEN" and _field_of(option) not in _FIELDS:
            raise AssertionError(f"option {option.env} names no field")


_assert_table_complete()
