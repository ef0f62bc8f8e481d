"""The node's health record: one JSON file beside the start script's log, a section per check.

    {"version": 1, "node": "<pod id>", "rank": 0, "updated_at": "2026-11-30T19:40:00Z",
     "status": "pass" | "fail" | "skipped",   # fail if any section failed; skipped if every one was
     "gate":      {"status", "reason", "gpus": [NVML readings], "findings": [...], "driver", "xid_watch"},
     "straggler": {"status", "reason", "tflops": {"<gpu>": TFLOPS}, "median_tflops", "floor_tflops", ...},
     "allreduce": {"status", "sizes": [{"bytes", "time_us", "algbw_gb_per_s", "busbw_gb_per_s"}],
                  "busbw_gb_per_s", "floor_gb_per_s"},
     "burn_in":   {"status", "reason", "minutes", "gpus": {...},
                  "busbw_gb_per_s": {"min", "median", "max", "p5", "timeline"}}}

Each section also says how long its check took (`elapsed_s`, seconds on the node's monotonic clock): the
goodput ledger's health time is their sum (`seconds`), served by the metrics agent.

docs/NODE-HEALTH.md describes every field. Writes are atomic (temp file, then rename), so a reader never
sees half a record.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

VERSION = 1


def load(path: Path) -> dict[str, Any]:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return obj if isinstance(obj, dict) else {}


def overall(record: dict[str, Any]) -> str:
    """fail if any section failed, skipped if all were skipped, else pass."""
    states = [v.get("status") for v in record.values() if isinstance(v, dict)]
    if "fail" in states:
        return "fail"
    return "skipped" if states and all(s == "skipped" for s in states) else "pass"


def seconds(record: dict[str, Any]) -> float | None:
    """The health checks' time on this boot: the sum of the sections' `elapsed_s` (None: none said)."""
    found = [
        float(v["elapsed_s"])
        for v in record.values()
        if isinstance(v, dict)
        and isinstance(v.get("elapsed_s"), int | float)
        and not isinstance(v.get("elapsed_s"), bool)
        and 0 <= v["elapsed_s"] < 1e7
    ]
    return sum(found) if found else None


def update(path: Path, section: str, data: dict[str, Any]) -> dict[str, Any]:
    """Set one section (replacing an earlier one of the same name) and rewrite the file atomically."""
    record = load(path)
    record[section] = data
    record |= {
        "version": VERSION,
        "node": os.environ.get("RUNPOD_POD_ID") or socket.gethostname(),
        "rank": int(os.environ.get("NODE_RANK", "0")),
        "updated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    record["status"] = overall(record)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return record
