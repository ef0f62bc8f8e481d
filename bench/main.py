"""`scripts/bench`: benchmark trainstack with the real Pulumi CLI against a local RunPod. Not a test.

The local RunPod runs the image-size latency model (emulator/latency.py) `--time-scale F` times faster than
real time, with RunPod's default quota of 60 requests per emulated minute. Our own timers are scaled the same
way (poll interval 10/F s, client token bucket 60*F per minute), so request counts do not depend on F and
wall times convert back to scale 1 (see `bench_stats.at_scale_one`). Results go to a JSON file;
`bench/report.py` turns them into docs/PERFORMANCE.md and the scaling plot.

    python -m bench.main [--quick] [--scale F] [--runs N] [--scale-one] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.forecast import measure as forecast_overhead
from bench.run import Bench, BenchFailed, Measurement, Workspace, bench
from common.stack import cli_version
from emulator.latency import image_gb, ready_s
from harness.pulumi_cli import REPO
from stackconfig import files

PROGRAMS = REPO / "bench" / "programs"
DEFAULT_OUT = REPO / ".state" / "bench" / "results.json"


def log(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


def scale_config(topology: str, nodes: int) -> dict[str, Any]:
    """A throwaway stack: `nodes` 8 x H100 nodes in US-TX-3, no volume, bucket or secrets."""
    return {
        "trainstack:cluster": {
            "gpu_type": "H100_SXM",
            "topology": topology,
            "nodes": nodes,
            "gpus_per_node": 8,
            "capacity": "on_demand",
            "data_centers": ["US-TX-3"],
        },
        "trainstack:training": {
            "command": ["train/train.py"],
            "max_run_hours": 1,
            "nccl_min_busbw_gb_per_s": 100,
        },
        "trainstack:runpod_spend_limit_per_hour": 1_000_000,
    }


def measured(ws: Workspace, verb: str, *extra: str) -> dict[str, Any]:
    """One command's figures; a failed command (a setup, a measured one or a teardown) stops the benchmark."""
    m: Measurement = ws.run(verb, *extra, check=False)
    status = "ok" if m.ok else "FAILED"
    log(f"{ws.stack} {m.command}: {m.wall_s:.1f} s, {m.totals['total']} requests, {status}")
    if not m.ok:
        raise ws.failed(verb, *extra)
    return m.as_dict()


def prod_critical_path_s() -> float:
    """The slowest chain of platform waits in `prod`: secrets, bucket and volume are instant on RunPod,
    then the cluster's members boot cold with fabric setup (emulator/latency.py)."""
    cluster = files.read_config("prod")["trainstack:cluster"]
    image = cluster.get("image", "runpod/pytorch:2.4.0-py3.11-cuda12.4.1-devel-ubuntu22.04")
    return ready_s(image_gb(image, 16.0), cold=True, cluster=True)


def run_prod_up(b: Bench, runs: int) -> list[dict[str, Any]]:
    out = []
    for _ in range(runs):
        ws = b.workspace("prod", files.read_config("prod"), policy=True)
        up = measured(ws, "up")
        if not up["requests"].get("POST /v2/clusters"):
            # "up from empty" that created no cluster adopted one left alive: not the figure it claims to be
            raise BenchFailed(
                f"prod up created no cluster (requests: {sorted(up['requests'])}); nothing reported"
            )
        out.append(up)
        measured(ws, "destroy")
    return out


def run_lifecycles(b: Bench) -> dict[str, dict[str, Any]]:
    """Requests of each verb for each shipped stack (policy pack on, as `scripts/up` runs it)."""
    results: dict[str, dict[str, Any]] = {}
    for stack in ("dev", "search", "prod"):
        ws = b.workspace(stack, files.read_config(stack), policy=True)
        results[stack] = {
            "preview (empty)": measured(ws, "preview"),
            "up": measured(ws, "up"),
            "preview (no-op)": measured(ws, "preview"),
            "up (no-op)": measured(ws, "up"),
            "refresh": measured(ws, "refresh"),
            "destroy": measured(ws, "destroy"),
        }
    return results


def run_overhead(b: Bench, runs: int) -> dict[str, Any]:
    """No-op preview/up of prod vs the same number of trivial dynamic resources, alternating, first without
    a policy pack (our program and providers alone), then with the policy pack on both (as `scripts/up`)."""
    out: dict[str, Any] = {}
    for variant, policy in (("bare", False), ("policy", True)):
        prod = b.workspace("prod", files.read_config("prod"), policy=policy)
        base = b.workspace(
            "base", {"bench:resources": 7}, program=PROGRAMS / "baseline", policy=policy, policy_config="prod"
        )
        measured(prod, "up")
        measured(base, "up")
        runs_of: dict[str, Any] = {"prod": {"preview": [], "up": []}, "baseline": {"preview": [], "up": []}}
        for _ in range(runs):
            for name, ws in (("prod", prod), ("baseline", base)):
                runs_of[name]["preview"].append(measured(ws, "preview"))
                runs_of[name]["up"].append(measured(ws, "up", "--expect-no-changes"))
        measured(prod, "destroy")
        if variant == "bare":
            out |= runs_of  # the figures the target is read against
        else:
            out["policy"] = runs_of
    return out


def run_scaling(b: Bench, pods: list[int], clusters: list[int]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {"pods": [], "clusters": []}
    for n in pods:
        ws = b.workspace(f"pods{n}", scale_config("pods", n))
        row = {"n": n, "up": measured(ws, "up"), "noop_up": measured(ws, "up", "--expect-no-changes")}
        row["destroy"] = measured(ws, "destroy")
        out["pods"].append(row)
    for k in clusters:
        config = scale_config("cluster", 2) | {"bench:clusters": k}
        ws = b.workspace(f"clusters{k}", config, program=PROGRAMS / "multi")
        row = {"n": k, "up": measured(ws, "up"), "noop_up": measured(ws, "up", "--expect-no-changes")}
        row["destroy"] = measured(ws, "destroy")
        out["clusters"].append(row)
    return out


# Python writes compiled modules (__pycache__) by default; this variable turns that off, so every process
# compiles every module it imports from source again. Some machines (this project's build machines) set it.
# The benchmark measures what a default Python does and says in the report when it had to unset it.
BYTECODE_ENV = "PYTHONDONTWRITEBYTECODE"


def machine() -> dict[str, Any]:
    mem_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line
    )
    pulumi = cli_version()
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "pulumi_cli": pulumi,
        "pulumi_sdk": _version("pulumi"),
        "date": time.strftime("%Y-%m-%d"),
        "bytecode_env_unset": BYTECODE_ENV in os.environ,
    }


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="one prod run, fewer scale points (~8 min)")
    p.add_argument("--scale", type=float, default=20.0, help="emulated seconds per real second")
    p.add_argument("--runs", type=int, default=None, help="repetitions of the timed runs (3; quick: 1/3)")
    p.add_argument(
        "--scale-one", action="store_true", help="also run prod `up` once at time scale 1 (~5 min)"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    info = machine()
    os.environ.pop(BYTECODE_ENV, None)  # for every command below (the workspaces copy os.environ)
    runs = args.runs or (1 if args.quick else 3)
    pods = [8, 32, 64] if args.quick else [8, 32, 128, 250]
    clusters = [1, 4, 16] if args.quick else [1, 2, 4, 8, 16]
    started = time.perf_counter()
    results: dict[str, Any] = {
        "machine": info,
        "scale": args.scale,
        "runs": runs,
        "quick": args.quick,
        "critical_path_s": prod_critical_path_s(),
        "command": "scripts/bench"
        + (" --quick" if args.quick else "")
        + (" --scale-one" if args.scale_one else ""),
    }
    try:
        collect(results, args.scale, args.scale_one, runs, pods, clusters)
    except BenchFailed as exc:
        log(f"{exc}\nbench: no results written; {args.out} is as it was")
        return 1
    results["bench_wall_s"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    log(f"results in {args.out} after {results['bench_wall_s']:.0f} s")
    return 0


def collect(
    results: dict[str, Any], scale: float, scale_one: bool, runs: int, pods: list[int], clusters: list[int]
) -> None:
    with tempfile.TemporaryDirectory(prefix="trainstack-bench-") as tmp:
        root = Path(tmp)
        with bench(root, 1000.0) as fast:  # the platform nearly instant: the engine's own time
            results["prod_up_fast"] = run_prod_up(fast, max(1, min(runs, 2)))
        with bench(root, scale) as b:
            results["prod_up"] = run_prod_up(b, runs)
            results["lifecycles"] = run_lifecycles(b)
            results["overhead"] = run_overhead(b, max(runs, 5))
            results["scaling"] = run_scaling(b, pods, clusters)
        if scale_one:
            with bench(root, 1.0) as real:
                results["prod_up_scale_one"] = run_prod_up(real, 1)
    results["forecast_overhead"] = forecast_overhead(previews=max(runs, 5))  # its own local RunPod


if __name__ == "__main__":
    sys.exit(main())
