"""Print the one device command that runs bench/gpu_lora.py on the GPU machine (issue #32's LoRA runs).

The device tool sends the session's own checkout, not a helper's worktree, and takes a command of at most
2000 characters: the script travels inside the command, comments stripped, zlib-compressed and base85-coded.
    python -m bench.gpu_lora_pack        # prints the command; its output lands in $OUT/lora.json
    python -m bench.gpu_lora_pack v      # the validation set (the script's list V), no nvidia-smi record
    python -m bench.gpu_lora_pack 8b     # bench/gpu_lora8b.py (the 8B frozen base; bench/pack.py packs it):
                                         # $OUT/lora8b.json and $OUT/smi.txt
"""

from __future__ import annotations

import base64
import re
import sys
import zlib
from pathlib import Path

from bench import pack

SCRIPT = Path(__file__).with_name("gpu_lora.py")
SCRIPT_8B = Path(__file__).with_name("gpu_lora8b.py")
LIMIT = 2000


def command(plan: str = "") -> str:
    if plan == "8b":
        return pack.command(SCRIPT_8B, prefix="nvidia-smi >$OUT/smi.txt;")
    lines = [
        re.sub(r"  # .*$", "", line) for line in SCRIPT.read_text().splitlines() if not line.startswith("#")
    ]
    packed = base64.b85encode(zlib.compress("\n".join(lines).encode(), 9)).decode()
    machine = "PLAN=v " if plan == "v" else "nvidia-smi >$OUT/smi.txt;"
    return (
        "export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 "
        "NVSHMEM_DISABLE_NVLS=1;"
        + machine
        + "python3 - <<'E'\nimport base64,zlib;exec(zlib.decompress(base64.b85decode('"
        + packed
        + "')))\nE\n"
    )


if __name__ == "__main__":
    text = command(sys.argv[1] if len(sys.argv) > 1 else "")
    if len(text) > LIMIT:
        raise SystemExit(f"command is {len(text)} characters, over the device tool's {LIMIT}")
    print(text, end="")
