"""Session-flow load generator for SITS (the seed article's section 2.2).

Shop-assistant chat journeys from a probabilistic state machine, with context that grows
along the session and paraphrased repeats, sent open loop (Poisson arrivals, bounded in
requests and time) through the official ``openai`` client to a gateway, sidecar or vLLM
on loopback or the local cluster's pods. Records each request (variant, cache result,
outcome, latency, TTFT, tokens) and summarises per variant.

    from sits_loadgen import LoadConfig, run_load
    result = await run_load(LoadConfig(base_url="http://127.0.0.1:8080/v1", model="chat",
                                       rate=8, max_requests=400, duration_s=60))
"""

from .config import LoadConfig, parse_temperatures
from .journey import EXIT, SHOP_JOURNEY, Journey, Turn, session_turns
from .plan import PlannedRequest, plan
from .records import CANCELLED, DROPPED, ERROR, SUCCESS, RequestRecord, SendResult
from .runner import LoadResult, Progress, run_load, run_load_sync
from .safety import UnsafeTargetError, check_target, is_allowed_host
from .sender import OpenAISender, Sender
from .summary import Stats, Summary, format_summary, summarize

__all__ = [
    "CANCELLED",
    "DROPPED",
    "ERROR",
    "EXIT",
    "SHOP_JOURNEY",
    "SUCCESS",
    "Journey",
    "LoadConfig",
    "LoadResult",
    "OpenAISender",
    "PlannedRequest",
    "Progress",
    "RequestRecord",
    "SendResult",
    "Sender",
    "Stats",
    "Summary",
    "Turn",
    "UnsafeTargetError",
    "check_target",
    "format_summary",
    "is_allowed_host",
    "parse_temperatures",
    "plan",
    "run_load",
    "run_load_sync",
    "session_turns",
    "summarize",
]
