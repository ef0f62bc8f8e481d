"""`scripts/bench --forecast`: what the forecast, `--compare` and the capacity read add to a preview.

Not a test. Issue #32's row: `--compare` and the capacity read add under 20 ms and one catalog request to a
preview (the comparison's module and call, the capacity modules, the stock read and its policy: ROW below).
The whole of what the forecast adds (its config model, package and policies as well) is shown beside it.

Two measurements of the `prod` stack:

- the added work itself, in fresh Python processes (imports are cold, as in every preview): building the
  `training.model` config model, parsing the section, importing and computing the forecast and the
  comparison, the forecast policies' checks, and the capacity read (its module, one
  `GET /v2/catalog/gpus/{id}?include=AVAILABILITY` to a local RunPod on loopback, the policy
  `capacity-available`). This resolves milliseconds. Each step is timed twice: on the wall clock, and on
  the process's CPU clock (imports through bench/importclock.py, `-X importtime`'s self column in CPU
  seconds; calls with `time.process_time`). On a loaded machine the wall clock also counts the time the
  process waits for a core; the CPU clock counts only the work, which is what a quiet machine's wall time
  is made of (the bytecode is read from the page cache), though sharing a core's caches still inflates it.
- no-op `pulumi preview` (policy pack on) of prod with and without its model section, alternating, against
  a local RunPod that answers at once, counting the stock reads each preview sends. This is the end-to-end
  check; its run-to-run spread on a shared machine is far wider than 20 ms, so it bounds the cost rather
  than measures it.

Results go into the results file under `forecast_overhead` and into the section of docs/PERFORMANCE.md
between the FORECAST markers (the rest of the file is left as it is).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.stats import Spread, spread, table
from harness.pulumi_cli import REPO

BYTECODE_ENV = "PYTHONDONTWRITEBYTECODE"  # the same variable bench/main.py unsets
BEGIN, END = "<!-- FORECAST-OVERHEAD -->", "<!-- /FORECAST-OVERHEAD -->"
TARGET_MS = 20.0

# One cold process under `python -X importtime`, importing what a preview's program and policy pack import,
# in their order. Counted: the self time of the modules the forecast added (their own bodies: class and
# policy construction, not the shared dependencies every preview loads anyway) and the time of the calls
# it adds (parse the model section, compute the forecast, run the three policies).
_PROBE = r"""
import bench.importclock as clock
clock.install()
import json, os, statistics, time, types
from pathlib import Path
import pydantic, pulumi_policy, yaml
class _Warm(pydantic.BaseModel):  # pydantic loads its model machinery with the first model of any preview
    x: int = 0
_Warm.model_json_schema()  # and its JSON schema machinery with the pack's first policy config schema
T, C = time.perf_counter, time.process_time
import stackconfig.loader
import policy.rules
from stackconfig.loader import load_stack_config
from pulumi_policy import StackValidationArgs
from policy.rules.forecast import COMPONENT, POLICIES
from stackconfig.files import read_config
raw = read_config("prod")
bare = {**raw, "trainstack:training": {k: v for k, v in raw["trainstack:training"].items() if k != "model"}}
def parse(cfg, clock=T, n=30):
    times = []
    for _ in range(n):
        s = clock(); load_stack_config(cfg); times.append(clock() - s)
    return statistics.median(times)
parse(raw, n=3)
parse_added = max(0.0, parse(raw) - parse(bare))
parse_added_cpu = max(0.0, parse(raw, C) - parse(bare, C))
config = load_stack_config(raw)
from forecast.stack import stack_forecast
from forecast.compare import compare
t0, c0 = T(), C()
out = stack_forecast(config).to_output()
tc, cc = T(), C()
out["compare"] = compare(config).to_output()
t1, c1 = T(), C()
component = types.SimpleNamespace(resource_type=COMPONENT, props={"forecast": out}, urn="", name="prod")
for policy in POLICIES:
    policy.validate(StackValidationArgs([component], {}), lambda message, urn=None: None)
t2, c2 = T(), C()
# The capacity read: the client is loaded by every preview anyway (prices, the data center check); the
# capacity module, the read itself and its policy are what part 4 of #32 adds.
import providers.runpod.client
from providers.runpod.client import RunPodClient
import providers.runpod.capacity as capacity
from policy.rules.availability import CAPACITY_AVAILABLE
# Not counted: the process's first client and its TLS context (~0.2 s cold, then cached). In a preview of
# prod the data center check (`GET /v2/catalog/datacenters`, before the stock read in the same check())
# builds it; the stock read's own client then costs well under a millisecond.
RunPodClient.from_env().close()
t3, c3 = T(), C()
read = capacity.read_capacity(RunPodClient.from_env, capacity.CapacityQuery(
    "NVIDIA H100 80GB HBM3", 8, "CLUSTER", "SECURE"))
assert read.error is None, read.error
t4, c4 = T(), C()
row = read.to_output(["US-TX-3"], 8, "US-TX-3")
cluster = types.SimpleNamespace(resource_type="pulumi-python:dynamic/runpod:InstantCluster",
                                props={"availability": row}, urn="", name="prod-cluster")
CAPACITY_AVAILABLE.validate(StackValidationArgs([cluster], {}), lambda message, urn=None: None)
t5, c5 = T(), C()
print(json.dumps(clock.SELF_CPU))
print(json.dumps({"parse": parse_added, "forecast_call": tc - t0, "compare_call": t1 - tc,
                  "policy_calls": t2 - t1, "capacity_read": t4 - t3, "capacity_policy": t5 - t4,
                  "parse_cpu": parse_added_cpu, "forecast_call_cpu": cc - c0, "compare_call_cpu": c1 - cc,
                  "policy_calls_cpu": c2 - c1, "capacity_read_cpu": c4 - c3, "capacity_policy_cpu": c5 - c4}))
print(json.dumps({"load_1min": os.getloadavg()[0]}))
"""


IMPORTS = ("config_model", "forecast_modules", "compare_module", "policy_module", "capacity_modules")
# The steps of issue #32's row (`--compare` and the capacity read); the rest is the forecast's own.
ROW = ("compare_module", "compare_call", "capacity_modules", "capacity_read", "capacity_policy")


def _added(name: str) -> str | None:
    """Which of the added imports module `name` belongs to (None: one every preview loads anyway)."""
    if name == "stackconfig.model":
        return "config_model"
    if name == "policy.rules.forecast":
        return "policy_module"
    if name == "forecast.compare":
        return "compare_module"
    if name in ("providers.runpod.capacity", "policy.stock", "policy.rules.availability"):
        return "capacity_modules"
    if name == "forecast" or name.startswith("forecast."):
        return "forecast_modules"
    return None


def _self_times(importtime: str) -> dict[str, float]:
    """Seconds of each added module's own import (`-X importtime` writes microseconds, self | cumulative)."""
    found = dict.fromkeys(IMPORTS, 0.0)
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        step = _added(name)
        if self_us.isdigit() and step:
            found[step] += int(self_us) / 1e6
    return found


def _self_cpu(charged: dict[str, float]) -> dict[str, float]:
    """CPU seconds of each added import (bench/importclock.py's per-module charges), as `<step>_cpu`."""
    found = dict.fromkeys(IMPORTS, 0.0)
    for name, seconds in charged.items():
        step = _added(name)
        if step:
            found[step] += seconds
    return {f"{step}_cpu": seconds for step, seconds in found.items()}


def cold_runs(runs: int, runpod_env: dict[str, str]) -> list[dict[str, float]]:
    """Milliseconds of each added step, one fresh process per run (after one untimed run that writes the
    bytecode cache, as a default Python keeps it: bench/main.py's BYTECODE_ENV explains); the capacity
    read goes to the local RunPod of `runpod_env`."""
    env = {k: v for k, v in os.environ.items() if k != BYTECODE_ENV} | runpod_env
    out = []
    for n in range(runs + 1):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", _PROBE],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        if n == 0:
            continue
        charged, timings, load = (json.loads(line) for line in proc.stdout.splitlines()[-3:])
        every = {k: v * 1000 for k, v in (_self_times(proc.stderr) | _self_cpu(charged) | timings).items()}
        cpu = {k: v for k, v in every.items() if k.endswith("_cpu")}
        wall = {k: v for k, v in every.items() if k not in cpu}
        sums = {
            "row": sum(wall[k] for k in ROW),
            "row_cpu": sum(cpu[f"{k}_cpu"] for k in ROW),
            "total": sum(wall.values()),
            "total_cpu": sum(cpu.values()),
        }
        out.append(wall | cpu | sums | load)
    return out


STOCK_READ = "GET /v2/catalog/gpus/{id}"  # the capacity read's endpoint, as the local RunPod counts it


def preview_ab(b: Any, runs: int) -> dict[str, list[float]]:
    """No-op preview wall seconds of prod with and without its model section, alternating, and the stock
    reads each preview sent (`stock_reads`)."""
    from stackconfig.files import read_config

    with_model = read_config("prod")
    training = {k: v for k, v in with_model["trainstack:training"].items() if k != "model"}
    without = with_model | {"trainstack:training": training}
    if isinstance(with_model.get("trainstack:bucket"), dict):
        # A bucket of its own: the bucket provider leaves alone one another stack owns.
        without["trainstack:bucket"] = with_model["trainstack:bucket"] | {"name": "trainstack-prodbare-ckpt"}
    walls: dict[str, list[float]] = {"with model": [], "without": [], "stock_reads": []}
    if runs:
        spaces = {
            "with model": b.workspace("prod", with_model, policy=True),
            # Another stack name, so its resources have names of their own on the shared local RunPod.
            "without": b.workspace("prodbare", without, policy=True, policy_config="prod"),
        }
        for ws in spaces.values():
            ws.run("up")
        for n in range(runs):
            # ABBA order, so that whatever favours the first (or second) preview of a round favours both.
            for name, ws in sorted(spaces.items(), reverse=n % 2 == 1):
                m = ws.run("preview")  # a failed one raises BenchFailed: no figure from it
                walls[name].append(m.wall_s)
                walls["stock_reads"].append(float(sum(m.requests.get(STOCK_READ, {}).values())))
        for ws in spaces.values():
            ws.run("destroy")
    return walls


def measure(cold: int = 15, previews: int = 5) -> dict[str, Any]:
    from bench.run import bench  # its local RunPod and moto

    with (
        tempfile.TemporaryDirectory(prefix="trainstack-bench-forecast-") as tmp,
        bench(Path(tmp), 1000.0) as b,
    ):
        b.runpod.admin.capacity(stock={})
        cold_ms = cold_runs(cold, b.runpod.env())
        walls = preview_ab(b, previews)
    return {"cold_ms": cold_ms, "preview_s": walls if previews else {}}


def section(res: dict[str, Any]) -> str:
    """The Markdown of docs/PERFORMANCE.md's forecast section, between its markers."""
    cold: list[dict[str, float]] = res["cold_ms"]
    labels = {
        "config_model": "import stackconfig.model (the config model's class)",
        "parse": "parse prod's model section",
        "forecast_modules": "import the forecast package (but forecast.compare)",
        "forecast_call": "compute prod's forecast",
        "compare_module": "import forecast.compare",
        "compare_call": "compare prod's 84 rented shapes (forecast.compare, the report's cheapest line)",
        "policy_module": "import policy/rules/forecast.py (4 policies, their config schemas)",
        "policy_calls": "run the 4 forecast policies",
        "capacity_modules": "import the capacity read and `capacity-available` (3 modules)",
        "capacity_read": "read prod's stock: one GET to the local RunPod on loopback, parsed",
        "capacity_policy": "run `capacity-available`",
        "row": "**`--compare` and the capacity read (issue #32's row)**",
        "total": "**all the forecast adds to a preview**",
    }
    rows = []
    for step in labels:
        s: Spread = spread([run[step] for run in cold])
        c: Spread = spread([run.get(f"{step}_cpu", float("nan")) for run in cold])
        figures = (s.median, s.low, s.high, c.median, c.low, c.high)
        rows.append([labels[step], *(f"{x:.2f}" for x in figures)])
    total = spread([run["total"] for run in cold])
    cpu = spread([run.get("total_cpu", float("nan")) for run in cold])
    row = spread([run.get("row", float("nan")) for run in cold])
    row_cpu = spread([run.get("row_cpu", float("nan")) for run in cold])
    verdict = "meets" if row_cpu.median < TARGET_MS else "MISSES"
    load = spread([run.get("load_1min", float("nan")) for run in cold]).median
    lines = [
        BEGIN,
        "## Forecast, `--compare` and capacity overhead (`scripts/bench --forecast`)",
        "",
        f"What the forecast, its comparison and the capacity read add to a preview of `prod`, in "
        f"{total.runs} fresh Python processes (cold imports, as in every preview), on a machine with a "
        f"1-minute load average of {load:.1f} on {os.cpu_count()} cores. Issue #32's row, `--compare` and "
        f"the capacity read: median **{row_cpu.median:.1f} ms of CPU** (slowest {row_cpu.high:.1f} ms), "
        f"which {verdict} the {TARGET_MS:g} ms target; {row.median:.1f} ms on the wall clock (slowest "
        f"{row.high:.1f} ms). All the forecast adds: {cpu.median:.1f} ms of CPU (slowest {cpu.high:.1f}), "
        f"{total.median:.1f} ms on the wall clock (slowest {total.high:.1f}). Import time is nearly all "
        "of it.",
        "",
        "The CPU clock counts the preview process's own work. At this load the wall clock also counts its "
        "waits for a core; sharing a core's caches inflates the CPU figures too, so they are an upper bound "
        "of the same work's CPU time on a quiet machine. Neither counts the wait for the stock read's "
        "answer beyond the process's own CPU: here the local RunPod on loopback; against RunPod, one network "
        "round trip, overlapped with the other resources' checks but not with its own resource's.",
        "",
        table(["step", "wall median ms", "min", "max", "CPU median ms", "min", "max"], rows),
    ]
    walls = res.get("preview_s") or {}
    if walls:
        w, wo = spread(walls["with model"]), spread(walls["without"])
        overlap = w.low <= wo.high and wo.low <= w.high
        reading = (
            "the ranges overlap, so at this spread the end-to-end figure cannot resolve milliseconds"
            if overlap
            else "the ranges do not overlap: a real difference, larger than the in-process figure above"
        )
        reads = sorted({int(n) for n in walls.get("stock_reads") or []})
        counted = (
            f" Each preview sent {' or '.join(map(str, reads))} stock read(s) (`{STOCK_READ}`)."
            if reads
            else ""
        )
        lines += [
            "",
            f"End to end, no-op `pulumi preview` of prod with the policy pack ({w.runs} alternating runs "
            f"each, local RunPod answering at once): medians differ by {w.median - wo.median:+.2f} s; "
            f"{reading}.{counted}",
            "",
            table(
                ["prod", "median s", "min s", "max s"],
                [
                    [name, f"{x.median:.2f}", f"{x.low:.2f}", f"{x.high:.2f}"]
                    for name, x in (("with model", w), ("without", wo))
                ],
            ),
        ]
    return "\n".join([*lines, END])


def splice(doc: str, text: str) -> str:
    """`doc` with its forecast section replaced by `text` (bench/report.py's splice_section; imported here,
    as bench/report.py imports this module)."""
    from bench.report import splice_section

    return splice_section(doc, text, BEGIN, END)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/bench --forecast", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, required=True, help="results JSON to add `forecast_overhead` to")
    p.add_argument("--doc", type=Path, required=True, help="the Markdown file whose section is replaced")
    p.add_argument("--cold", type=int, default=15, help="fresh processes timed (default 15)")
    p.add_argument("--previews", type=int, default=5, help="no-op previews each way; 0 skips them")
    args = p.parse_args(argv)
    results, doc = args.results, args.doc
    res = measure(args.cold, args.previews)
    stored: dict[str, Any] = json.loads(results.read_text()) if results.exists() else {}
    stored["forecast_overhead"] = res
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(stored, indent=1))
    doc.write_text(splice(doc.read_text(), section(res)))
    row = spread([run["row"] for run in res["cold_ms"]])
    row_cpu = spread([run["row_cpu"] for run in res["cold_ms"]])
    cpu = spread([run["total_cpu"] for run in res["cold_ms"]])
    print(
        f"bench: --compare and the capacity read add {row_cpu.median:.2f} ms of CPU "
        f"(max {row_cpu.high:.2f}), {row.median:.2f} ms of wall (max {row.high:.2f}) to a preview; "
        f"all the forecast adds {cpu.median:.2f} ms of CPU; {doc} updated"
    )
    return 0 if row_cpu.median < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
