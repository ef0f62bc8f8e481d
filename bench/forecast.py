"""`scripts/bench --forecast`: what the forecast, `--compare` and the capacity read add to a preview (target:
under 20 ms, and one catalog request for the stock). Not a test.

Two measurements of the `prod` stack:

- the added work itself, in fresh Python processes (imports are cold, as in every preview): building the
  `training.model` config model, parsing the section, importing and computing the forecast and the
  comparison, the forecast policies' checks, and the capacity read (its module, one
  `GET /v2/catalog/gpus/{id}?include=AVAILABILITY` to a local RunPod on loopback, the policy
  `capacity-available`). This resolves milliseconds.
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
import json, os, statistics, time, types
from pathlib import Path
import pydantic, pulumi_policy, yaml
class _Warm(pydantic.BaseModel):  # pydantic loads its model machinery with the first model of any preview
    x: int = 0
_Warm.model_json_schema()  # and its JSON schema machinery with the pack's first policy config schema
T = time.perf_counter
import stackconfig.config
import policy.rules
from stackconfig.config import load_stack_config
from pulumi_policy import StackValidationArgs
from policy.rules.forecast import COMPONENT, POLICIES
from stackconfig.files import read_config
raw = read_config("prod")
bare = {**raw, "trainstack:training": {k: v for k, v in raw["trainstack:training"].items() if k != "model"}}
def parse(cfg, n=30):
    times = []
    for _ in range(n):
        s = T(); load_stack_config(cfg); times.append(T() - s)
    return statistics.median(times)
parse(raw, 3)
parse_added = max(0.0, parse(raw) - parse(bare))
config = load_stack_config(raw)
from forecast.stack import stack_forecast
from forecast.compare import compare
t0 = T()
out = stack_forecast(config).to_output()
tc = T()
out["compare"] = compare(config).to_output()
t1 = T()
component = types.SimpleNamespace(resource_type=COMPONENT, props={"forecast": out}, urn="", name="prod")
for policy in POLICIES:
    policy.validate(StackValidationArgs([component], {}), lambda message, urn=None: None)
t2 = T()
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
t3, c3 = T(), time.process_time()
read = capacity.read_capacity(RunPodClient.from_env, capacity.CapacityQuery(
    "NVIDIA H100 80GB HBM3", 8, "CLUSTER", "SECURE"))
assert read.error is None, read.error
t4, c4 = T(), time.process_time()
row = read.to_output(["US-TX-3"], 8, "US-TX-3")
cluster = types.SimpleNamespace(resource_type="pulumi-python:dynamic/runpod:InstantCluster",
                                props={"availability": row}, urn="", name="prod-cluster")
CAPACITY_AVAILABLE.validate(StackValidationArgs([cluster], {}), lambda message, urn=None: None)
t5 = T()
print(json.dumps({"parse": parse_added, "forecast_call": tc - t0, "compare_call": t1 - tc,
                  "policy_calls": t2 - t1, "capacity_read": t4 - t3, "capacity_policy": t5 - t4,
                  "capacity_read_cpu": c4 - c3}))
print(json.dumps({"load_1min": os.getloadavg()[0]}))
"""


def _self_times(importtime: str) -> dict[str, float]:
    """Seconds of each added module's own import (`-X importtime` writes microseconds, self | cumulative)."""
    found = {"config_model": 0.0, "forecast_modules": 0.0, "policy_module": 0.0, "capacity_modules": 0.0}
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, _, name = (part.strip() for part in line.removeprefix("import time:").split("|"))
        if not self_us.isdigit():
            continue
        if name == "stackconfig.model":
            found["config_model"] += int(self_us) / 1e6
        elif name == "policy.rules.forecast":
            found["policy_module"] += int(self_us) / 1e6
        elif name in ("providers.runpod.capacity", "policy.stock", "policy.rules.availability"):
            found["capacity_modules"] += int(self_us) / 1e6
        elif name == "forecast" or name.startswith("forecast."):
            found["forecast_modules"] += int(self_us) / 1e6
    return found


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
        timings, load = (json.loads(line) for line in proc.stdout.splitlines()[-2:])
        parts = {k: v * 1000 for k, v in (_self_times(proc.stderr) | timings).items()}
        cpu = {k: parts.pop(k) for k in list(parts) if k.endswith("_cpu")}  # shown, not added: part of a wall
        out.append(parts | {"total": sum(parts.values())} | cpu | load)
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
        # A bucket of its own: the bucket provider leaves alone one another stack owns (issue #34).
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
        "forecast_modules": "import the forecast package",
        "forecast_call": "compute prod's forecast",
        "compare_call": "compare prod's 84 rented shapes (forecast.compare, the report's cheapest line)",
        "policy_module": "import policy/rules/forecast.py (4 policies, their config schemas)",
        "policy_calls": "run the 4 forecast policies",
        "capacity_modules": "import the capacity read and `capacity-available` (3 modules)",
        "capacity_read": "read prod's stock: one GET to the local RunPod on loopback, parsed",
        "capacity_read_cpu": "... of which CPU in the preview's process (the rest: the server, the wait)",
        "capacity_policy": "run `capacity-available`",
        "total": "**added to a preview**",
    }
    rows = []
    for step in labels:
        s: Spread = spread([run[step] for run in cold])
        rows.append([labels[step], f"{s.median:.2f}", f"{s.low:.2f}", f"{s.high:.2f}"])
    total = spread([run["total"] for run in cold])
    verdict = "meets" if total.median < TARGET_MS else "MISSES"
    load = spread([run.get("load_1min", float("nan")) for run in cold]).median
    lines = [
        BEGIN,
        "## Forecast, `--compare` and capacity overhead (`scripts/bench --forecast`)",
        "",
        f"What the forecast, its comparison and the capacity read add to a preview of `prod`, in "
        f"{total.runs} fresh Python processes (cold "
        f"imports, as in every preview) on a machine with a 1-minute load average of {load:.1f} on "
        f"{os.cpu_count()} cores: median {total.median:.1f} ms, which {verdict} the {TARGET_MS:g} ms target "
        f"(slowest {total.high:.1f} ms). Import time is nearly all of it.",
        "",
        table(["step", "median ms", "min ms", "max ms"], rows),
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
    total = spread([run["total"] for run in res["cold_ms"]])
    print(f"bench: forecast adds {total.median:.2f} ms (max {total.high:.2f}) to a preview; {doc} updated")
    return 0 if total.median < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
