"""Render `scripts/bench` results as docs/PERFORMANCE.md and the scaling plot (matplotlib, Agg backend).

python -m bench.report RESULTS.json OUT.md OUT.png [--before BEFORE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.forecast import section as forecast_section
from bench.stats import Fit, Spread, at_scale_one, linear_fit, spread, table

VERBS = ("preview (empty)", "up", "preview (no-op)", "up (no-op)", "refresh", "destroy")


def splice_section(doc: str, text: str, begin: str, end: str) -> str:
    """`doc` (docs/PERFORMANCE.md) with its section between the `begin` and `end` markers replaced by `text`
    (which carries the markers itself), or `text` appended when the doc has no such section: the one way
    each benchmark (bench/storm.py, bench/supervisor.py, bench/forecast.py) writes its own part of the file,
    keeping the rest as it is."""
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        return head + text + rest.split(end, 1)[1]
    return doc.rstrip("\n") + "\n\n" + text + "\n"


def _walls(runs: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(r["wall_s"]) for r in runs]


def prod_up_figures(res: Mapping[str, Any]) -> dict[str, Any]:
    """Wall time at scale 1 (converted, and measured when run), overhead over the critical path."""
    scale, crit = float(res["scale"]), float(res["critical_path_s"])
    fixed = spread(_walls(res["prod_up_fast"])).median
    converted = [at_scale_one(w, fixed, scale) for w in _walls(res["prod_up"])]
    out: dict[str, Any] = {"fixed_s": fixed, "converted": spread(converted), "critical_s": crit}
    measured = res.get("prod_up_scale_one") or []
    if measured:
        out["measured"] = spread(_walls(measured))
    best = out.get("measured") or out["converted"]
    out["overhead_s"] = best.median - crit
    out["ratio"] = best.median / crit
    return out


def _req_cell(m: Mapping[str, Any]) -> str:
    t = m["totals"]
    return f"{t['total']} ({t['polls']} polls, {t['429']} x 429)"


def lifecycle_table(res: Mapping[str, Any]) -> str:
    rows = [[stack, *(_req_cell(ops[v]) for v in VERBS)] for stack, ops in res["lifecycles"].items()]
    return table(["stack", *VERBS], rows)


def endpoint_table(res: Mapping[str, Any], stack: str, verb: str) -> str:
    reqs = res["lifecycles"][stack][verb]["requests"]
    rows = [[f"`{e}`", ", ".join(f"{k}: {v}" for k, v in sorted(o.items()))] for e, o in sorted(reqs.items())]
    return table(["endpoint", "responses"], rows)


def overhead_figures(res: Mapping[str, Any]) -> list[tuple[str, Spread, Spread]]:
    """(command, prod walls, baseline walls) of the no-op overhead section, bare then with the pack."""
    ov = res["overhead"]
    out = []
    for label, runs in (("", ov), (" with the policy pack", ov.get("policy"))):
        if not runs:
            continue
        for verb in ("preview", "up"):
            prod, base = spread(_walls(runs["prod"][verb])), spread(_walls(runs["baseline"][verb]))
            out.append((f"no-op `{verb}`{label}", prod, base))
    return out


def overhead_rows(res: Mapping[str, Any]) -> list[list[str]]:
    return [
        [name, prod.text(2), base.text(2), f"{prod.median / base.median:.2f}"]
        for name, prod, base in overhead_figures(res)
    ]


def fits(res: Mapping[str, Any], kind: str) -> dict[str, Fit]:
    rows = res["scaling"][kind]
    xs = [float(r["n"]) for r in rows]
    if len(set(xs)) < 2:
        return {}
    return {
        "wall_s": linear_fit(xs, [float(r["up"]["wall_s"]) for r in rows]),
        "requests": linear_fit(xs, [float(r["up"]["totals"]["total"]) for r in rows]),
        "rss_mib": linear_fit(xs, [float(r["up"]["peak_rss_mib"]) for r in rows]),
    }


def scaling_table(res: Mapping[str, Any], kind: str) -> str:
    rows = []
    for r in res["scaling"][kind]:
        up, roles = r["up"], r["up"]["peak_rss_by_role"]
        rows.append(
            [
                r["n"],
                f"{up['wall_s']:.1f}",
                f"{at_scale_one(up['wall_s'], r['noop_up']['wall_s'], res['scale']):.0f}",
                up["totals"]["total"],
                up["totals"]["429"],
                f"{r['noop_up']['wall_s']:.1f}",
                f"{up['peak_rss_mib']:.0f}",
                f"{roles.get('pulumi', 0):.0f}",
                f"{roles.get('provider', 0):.0f}",
                f"{r['destroy']['wall_s']:.1f}",
                "ok" if up["ok"] and r["destroy"]["ok"] else "FAILED",
            ]
        )
    header = ["n", "up s (scaled)", "up s @1x", "requests", "429s", "no-op up s", "peak RSS MiB"]
    return table([*header, "CLI MiB", "provider MiB", "destroy s", ""], rows)


def fit_lines(res: Mapping[str, Any], kind: str, unit: str) -> str:
    lines = []
    for name, fit in fits(res, kind).items():
        lines.append(f"- {name}: {fit.slope:.3g} per {unit} + {fit.intercept:.3g} (R² = {fit.r2:.3f})")
    return "\n".join(lines)


def plot(res: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for kind, label, marker in (
        ("pods", "pods topology: nodes", "o"),
        ("clusters", "clusters in one stack", "s"),
    ):
        rows = res["scaling"][kind]
        xs = [r["n"] for r in rows]
        series = (
            [r["up"]["wall_s"] for r in rows],
            [r["up"]["totals"]["total"] for r in rows],
            [r["up"]["peak_rss_mib"] for r in rows],
        )
        for ax, ys in zip(axes, series, strict=True):
            ax.plot(xs, ys, marker=marker, label=label)
    titles = (f"`pulumi up` wall s (time scale {res['scale']:g})", "API requests per up", "peak RSS MiB")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("n")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def before_after(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    rows: list[list[object]] = []
    b, a = prod_up_figures(before), prod_up_figures(after)
    rows.append(["prod `up` wall s @1x", f"{b['converted'].median:.0f}", f"{a['converted'].median:.0f}"])
    rows.append(["prod `up` overhead ratio", f"{b['ratio']:.3f}", f"{a['ratio']:.3f}"])

    def medians(prod: Spread, base: Spread) -> str:
        return f"{prod.median:.2f} / {base.median:.2f} ({prod.median / base.median:.2f}x)"

    old_overhead = {name: (prod, base) for name, prod, base in overhead_figures(before)}
    for name, prod, base in overhead_figures(after):
        old = old_overhead.get(name)
        rows.append([f"{name} s, prod / baseline", medians(*old) if old else "-", medians(prod, base)])
    for stack in after["lifecycles"]:
        for verb in ("up", "refresh", "destroy"):
            old = before["lifecycles"].get(stack, {}).get(verb, {}).get("totals", {}).get("total", "-")
            new = after["lifecycles"][stack][verb]["totals"]["total"]
            rows.append([f"{stack} `{verb}` requests", old, new])
    for kind in ("pods", "clusters"):
        old_rows = {r["n"]: r for r in before["scaling"][kind]}
        for r in after["scaling"][kind]:
            o = old_rows.get(r["n"])
            if o:
                rows.append(
                    [
                        f"{kind} n={r['n']} up s (scaled)",
                        f"{o['up']['wall_s']:.1f}",
                        f"{r['up']['wall_s']:.1f}",
                    ]
                )
                rows.append(
                    [f"{kind} n={r['n']} up requests", o["up"]["totals"]["total"], r["up"]["totals"]["total"]]
                )
                rows.append(
                    [
                        f"{kind} n={r['n']} destroy s (scaled)",
                        f"{o['destroy']['wall_s']:.1f}",
                        f"{r['destroy']['wall_s']:.1f}",
                    ]
                )
    return table(["figure", "before", "after"], rows)


def render(res: Mapping[str, Any], plot_name: str, before: Mapping[str, Any] | None) -> str:
    m, p = res["machine"], prod_up_figures(res)
    prod_up = res["lifecycles"]["prod"]["up"]
    cluster_polls = prod_up["requests"].get("GET /v2/clusters/{id}/pods", {}).get("200", 0)
    poll_period = p["critical_s"] / cluster_polls if cluster_polls else float("inf")
    measured = p.get("measured")
    parts = [
        "# Performance",
        "",
        f"Generated by `{res['command']}` on {m['date']} (benchmark wall time {res['bench_wall_s']:.0f} s). "
        "Not a test: figures vary with the machine and its load. Rerun with `scripts/bench --quick` "
        "(< 10 min) or `scripts/bench --scale-one` (full, ~20 min); `--report-only` re-renders.",
        "",
        "## Method",
        "- The real Pulumi CLI drives the shipped program against the local RunPod with the image-size "
        "latency model (`emulator/latency.py`: a pod is ready ~165 s after create for a cold 16 GB image, "
        "~33 s cached; "
        "Instant Cluster members cold + 60 s fabric), RunPod's default quota of 60 requests per emulated "
        f"minute, and moto for S3. The clock runs {res['scale']:g}x faster; our poll interval (10 s) and "
        "client token bucket (60/min) are scaled by the same factor, so request counts do not depend on it.",
        "- Wall time at scale 1 = engine time + scale x (scaled wall - engine time), where engine time is "
        "the same command with the platform nearly instant (time scale 1000)"
        + (" — and prod `up` was also run at scale 1 to check the conversion." if measured else "."),
        f"- {res['runs']} run(s) per timed figure: median [min, max]. Requests come from the emulator's "
        "`/_admin/counters` diffed around each command; peak RSS samples `/proc` of the CLI's process tree "
        "(CLI, language host, program, dynamic provider, policy pack) every 100 ms.",
        *(
            [
                "- This machine sets `PYTHONDONTWRITEBYTECODE`; the benchmark unsets it, as a default Python "
                "has it, so that modules compile once into `__pycache__` and not in every process (with it "
                "set, a no-op preview of prod recompiles ~4,600 lines of ours: +0.1-0.15 s here)."
            ]
            if m.get("bytecode_env_unset")
            else []
        ),
        "",
        "## Machine",
        table(
            ["cores", "cpu", "memory", "kernel", "python", "pulumi CLI", "pulumi SDK"],
            [
                [
                    m["cores"],
                    m["cpu"],
                    f"{m['memory_gib']} GiB",
                    m["kernel"],
                    m["python"],
                    m["pulumi_cli"],
                    m["pulumi_sdk"],
                ]
            ],
        ),
        "",
        "## 1. `pulumi up` of prod from empty vs the emulated critical path",
        f"Critical path: the cluster's boot, {p['critical_s']:.0f} s (secrets, bucket and volume are instant "
        "on RunPod and come first).",
        "",
        table(
            ["figure", "seconds"],
            [
                ["engine time (scale 1000)", f"{p['fixed_s']:.1f}"],
                [f"up at scale {res['scale']:g}, converted to scale 1", p["converted"].text()],
                *([["up measured at scale 1", measured.text()]] if measured else []),
                ["critical path", f"{p['critical_s']:.0f}"],
                ["overhead (s)", f"{p['overhead_s']:.1f}"],
                ["ratio wall / critical path", f"{p['ratio']:.3f}"],
            ],
        ),
        "",
        "## 2. API requests per command (policy pack on, as `scripts/up` runs it)",
        "Total (readiness polls, 429 responses) at the default 60/min quota.",
        "",
        lifecycle_table(res),
        "",
        f"prod `up` by endpoint (the cluster was polled {cluster_polls} times over its "
        f"{p['critical_s']:.0f} s "
        f"boot: one poll per {poll_period:.1f} s):",
        "",
        endpoint_table(res, "prod", "up"),
        "",
        "## 3. Our providers' overhead: no-op commands vs a trivial baseline",
        "prod (7 custom resources in one component) vs `bench/programs/baseline` (7 dynamic "
        "resources that do nothing, in one component), run alternately; first with no policy pack (our "
        "program and providers alone: the figure the target is read against), then with the policy pack and "
        "prod's policy config on both, as `scripts/up` runs.",
        "",
        table(["command", "prod s", "baseline s", "ratio"], overhead_rows(res)),
        "",
        "## 4. Scale",
        f"Throwaway stacks in temp workspaces, US-TX-3, capacity and spend limit raised on the emulator; "
        f"time scale {res['scale']:g}. `up s @1x` converts with the no-op `up` of the same stack as "
        "engine time.",
        "",
        "### `pods` topology, n nodes",
        scaling_table(res, "pods"),
        "",
        fit_lines(res, "pods", "node"),
        "",
        "### n Instant Clusters (2 nodes each) in one stack (`bench/programs/multi`)",
        scaling_table(res, "clusters"),
        "",
        fit_lines(res, "clusters", "cluster"),
        "",
        f"![scaling]({plot_name})",
        "",
    ]
    if before is not None:
        parts += ["## Before and after the optimizations", before_after(before, res), ""]
    if res.get("forecast_overhead"):
        parts += [forecast_section(res["forecast_overhead"]), ""]
    return "\n".join(parts)


def failed_commands(res: Any, where: str = "") -> list[str]:
    """Every measured command in the results that failed (`ok` false), by where it sits in the JSON."""
    if isinstance(res, Mapping):
        if res.get("ok") is False and "command" in res:
            return [f"{where or '.'}: {res['command']}"]
        return [f for key, value in res.items() for f in failed_commands(value, f"{where}.{key}")]
    if isinstance(res, list):
        return [f for i, value in enumerate(res) for f in failed_commands(value, f"{where}[{i}]")]
    return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.report")
    p.add_argument("results", type=Path)
    p.add_argument("markdown", type=Path)
    p.add_argument("png", type=Path)
    p.add_argument("--before", type=Path, default=None)
    args = p.parse_args(argv)
    res = json.loads(args.results.read_text())
    failed = failed_commands(res)
    if failed:
        # A figure measured after a failed setup or teardown is not the figure it claims to be.
        print(
            f"bench.report: {args.results} holds failed commands; not reported (run scripts/bench again):\n  "
            + "\n  ".join(failed[:10]),
            file=sys.stderr,
        )
        return 1
    before = json.loads(args.before.read_text()) if args.before else None
    if before is not None and failed_commands(before):
        print(f"bench.report: {args.before} holds failed commands; no before column", file=sys.stderr)
        before = None
    plot(res, args.png)
    text = render(res, args.png.name, before)
    # Findings are written by people (docs/performance-notes.md) and kept across regenerations.
    notes = args.markdown.with_name("performance-notes.md")
    if notes.is_file():
        text += "\n" + notes.read_text()
    args.markdown.write_text(text)
    print(f"wrote {args.markdown} and {args.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
