"""On a machine with an NVIDIA GPU: does the operator's view of it hold?

Reads what the NVIDIA GPU feature discovery would label the node with
(`nvidia.com/gpu.product`: the product name, spaces as dashes), the memory, the MIG mode
and, where the driver lets this process see them, the MIG GPU-instance profiles, and checks
them against the operator's table (operator/sits_operator/model/mig.py). Run by hand on a
lent GPU machine (`python3 scripts/device/gpu_facts.py`); it changes no GPU setting.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))
from sits_operator.model import mig  # stdlib only: no venv needed


def smi(*args: str) -> str:
    done = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    return (done.stdout + done.stderr).strip()


def main() -> int:
    name, memory, mode = (
        smi("--query-gpu=name,memory.total,mig.mode.current", "--format=csv,noheader")
        .split("\n")[0]
        .split(", ")
    )
    product = name.replace(" ", "-")
    print(f"gpu: {name!r} -> nvidia.com/gpu.product={product!r}; memory {memory}; MIG {mode}")
    known = product in mig.PRODUCT_PROFILES
    print(f"the operator knows this product: {known}")
    profiles = smi("mig", "-lgip")
    print("nvidia-smi mig -lgip:\n" + profiles)
    seen = sorted(set(re.findall(r"MIG\s+(\dg\.\d+gb(?:\+me)?)", profiles)))
    if seen:
        table = set(mig.PRODUCT_PROFILES.get(product, ()))
        print(f"profiles the driver lists: {seen}")
        print(f"in the driver, not in the table: {sorted(set(seen) - table)}")
        print(f"in the table, not in the driver: {sorted(table - set(seen))}")
    else:
        print("no MIG profiles visible to this process (MIG off, or not allowed here)")
    if known:
        largest = max(mig.PRODUCT_PROFILES[product], key=mig.profile_memory_bytes)
        total_mib = float(memory.split()[0])
        print(
            f"largest profile {largest}: {mig.profile_memory_bytes(largest) / 2**20:.0f} MiB "
            f"nominal vs {total_mib:.0f} MiB on the card"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
