"""`make demo`: the whole system live on the local cluster's real node (sits_live.demo).

python e2e/demo.py            # live: real vLLM pods, gateway, Prometheus, operator
python e2e/demo.py --kwok     # the fast story on fake GPU nodes (synthetic metrics)
python e2e/demo.py --down     # stop everything either one started
"""

from __future__ import annotations

import argparse

import demo_kwok
from sits_live import demo as live


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--down", action="store_true", help="stop the demo and the cluster")
    parser.add_argument(
        "--kwok",
        action="store_true",
        help="the fast story on kwok's fake GPU nodes, fed by synthetic gateway metrics",
    )
    args = parser.parse_args()
    if args.down:
        demo_kwok.stop_background()
        live.down()
    elif args.kwok:
        demo_kwok.demo()
    else:
        live.demo()


if __name__ == "__main__":
    main()
