"""`scripts/forecast STACK [--set key=value ...]`: a stack's forecast in the terminal, no Pulumi, no account.

Reads `stacks/Pulumi.<STACK>.yaml`, applies each `--set` (a key path under `trainstack:`, e.g.
`cluster.nodes=4`, `training.max_run_hours=48`; a bare model field such as `sharding=zero3` means
`training.model.sharding`), parses it exactly as `pulumi preview` would, and prints the breakdown.
It ends with the run cap the run will be held to, as the policy pack judges it: the run's one cost cap,
`trainstack:run.max_cost_usd` in the stack file (after any `--set run.max_cost_usd=...`), and the deprecated
`max_run_cost_usd` of the `run-cost-within-budget` policy in `policy/config/<STACK>.json`: the stricter of
the two when both are set, the one set when only one is, else that policy's default.
`--model llama-3-70b` sets a published model's shapes first (forecast/presets.py). The forecast is always
printed, then what the stack's rules say of the stack (e.g. the account's spend limit).
Exit status: 0 the model fits, the run is within its cap and no rule refuses it, 1 it does not fit (or the
stack has no model section), 2 bad config or usage, 3 it fits but `scripts/up` refuses it: the run costs
more than its cap, or a rule of the stack config refuses the stack (listed after the forecast).
`--compare [GPU,...]` prints instead every GPU type, node count and sharding RunPod rents for the run,
cheapest run first, with the cheapest feasible one and its saving (forecast.compare); exit 0 when one fits.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from common.stackname import stack_name_problem
from common.terminal import plain
from forecast.chart import ChartError, compare_chart, memory_chart
from forecast.compare import CompareError, compare
from forecast.keys import KeyError_, resolve
from forecast.presets import UnknownPreset, apply_preset
from forecast.stack import forecast_input, stack_forecast
from forecast.table import render, render_compare
from stackconfig import files
from stackconfig.config import NAMESPACE, ConfigError, StackConfig
from stackconfig.derived import run_cost_cap
from stackconfig.loader import load_with_rule_problems
from stackconfig.model import ModelConfig, parameter_notice
from stackconfig.supervisor import RUN_CAP_KEY

EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_BAD_INPUT, EXIT_OVER_CAP = 0, 1, 2, 3
RUN_CAP_POLICY = "run-cost-within-budget"


class UsageError(ValueError):
    """A `--set` that cannot be applied; the message says how to write it."""


def apply_set(raw: Mapping[str, Any], assignment: str) -> dict[str, Any]:
    """`raw` with one `key.path=value` applied (value read as YAML: 4, true, zero3, [a, b])."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"--set {assignment!r}: write key=value, e.g. --set cluster.nodes=4")
    parts = key.strip().removeprefix(f"{NAMESPACE}:").split(".")
    if len(parts) == 1 and parts[0] in ModelConfig.model_fields:
        parts = ["training", "model", parts[0]]
    else:
        try:
            parts = resolve(key)  # a short path completed, an unknown one refused with the closest key
        except KeyError_ as exc:
            raise UsageError(f"--set {assignment!r}: {exc}") from None
    out = copy.deepcopy(dict(raw))
    top = f"{NAMESPACE}:{parts[0]}"
    if len(parts) == 1:
        out[top] = yaml.safe_load(text)
        return out
    node = out.setdefault(top, {})
    for part in parts[1:-1]:
        if not isinstance(node, dict):
            raise UsageError(f"--set {assignment!r}: {top} is not a mapping, so it has no {part!r}")
        node = node.setdefault(part, {})
    if not isinstance(node, dict):
        raise UsageError(f"--set {assignment!r}: {'.'.join(parts[:-1])} is not a mapping")
    node[parts[-1]] = yaml.safe_load(text)
    return out


def run_cap(stack: str, config: StackConfig, policy_dir: Path) -> tuple[float, str]:
    """The run cost cap the run is held to, and where it comes from (a line for people), as the policy pack
    judges it: the stricter of the stack's one cap and the policy config's own (deprecated) key when both are
    set; the one that is set when only one is; else the policy's default."""
    from policy.rules.forecast import BudgetConfig  # the policy's own model: its default is written once

    stack_cap = run_cost_cap(config)
    key = RUN_CAP_KEY if config.run.max_cost_usd else f"{NAMESPACE}:alerts.budget_usd (deprecated)"
    stack_where = f"{key} in stacks/Pulumi.{stack}.yaml"
    path = policy_dir / f"{stack}.json"
    entry: Any = {}
    if path.is_file():
        doc = json.loads(path.read_bytes().decode("utf-8")) or {}  # UnicodeDecodeError is a ValueError
        if not isinstance(doc, dict):
            raise ValueError(
                'is not a JSON object; write {"<policy name>": {...}} (python -m policy.config_file)'
            )
        entry = doc.get(RUN_CAP_POLICY) or {}
    given = {k: v for k, v in entry.items() if k != "enforcementLevel"} if isinstance(entry, dict) else {}
    cap = BudgetConfig.model_validate(given).max_run_cost_usd
    shown = path.relative_to(files.REPO) if path.is_relative_to(files.REPO) else path
    where = f"{RUN_CAP_POLICY}.max_run_cost_usd in {shown}"
    if not stack_cap:
        return cap, where if "max_run_cost_usd" in given else f"the {RUN_CAP_POLICY} policy's default"
    if "max_run_cost_usd" not in given:
        return stack_cap, stack_where
    if cap < stack_cap:
        return cap, f"{where}, the stricter of two caps: {stack_where} is ${stack_cap:,.2f}"
    return stack_cap, f"{stack_where}, the stricter of two caps: {where} is ${cap:,.2f}"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/forecast",
        description="Memory per GPU, hours and run cost of a stack's training run (docs/FORECAST.md).",
    )
    p.add_argument("stack", metavar="STACK", help="stack name: dev, search, prod, ...")
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change the config first, e.g. --set cluster.nodes=4 --set sharding=zero3 (repeatable)",
    )
    p.add_argument(
        "--model",
        metavar="PRESET",
        help="a published model's shapes first (forecast/presets.py): llama-3-8b, llama-3-70b, "
        "llama-3.1-405b, llama-2-7b, llama-2-13b, llama-2-70b, mistral-7b, qwen2.5-7b, qwen2.5-72b",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="also print the step's parts (matmul, attention, elementwise, optimizer, recompute, "
        "communication) "
        "and what sets the memory peak",
    )
    p.add_argument("--json", action="store_true", help="print the stack output `forecast` as JSON instead")
    p.add_argument(
        "--compare",
        nargs="?",
        const="",
        default=None,
        metavar="GPU,...",
        help="compare every GPU type, node count and sharding RunPod rents for this run (or only the GPU "
        "types named, e.g. H100_SXM,H200_SXM), cheapest run first",
    )
    p.add_argument(
        "--png",
        type=Path,
        metavar="FILE",
        help="also draw the forecast into FILE: with --compare run cost against hours of every option, "
        "else the memory per GPU by part (needs matplotlib)",
    )
    p.add_argument("--stacks-dir", type=Path, default=files.STACKS_DIR, help=argparse.SUPPRESS)
    p.add_argument(
        "--policy-dir", type=Path, default=files.REPO / "policy" / "config", help=argparse.SUPPRESS
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bad_name = stack_name_problem(args.stack)  # before the name becomes a path (common/stackname.py)
    if bad_name is not None:
        print(f"forecast: {bad_name}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        raw = files.read_config(args.stack, args.stacks_dir)
        if args.model:
            raw = apply_preset(raw, args.model, NAMESPACE)
        for assignment in args.sets:
            raw = apply_set(raw, assignment)
        config, refusals = load_with_rule_problems(raw)
        # What the model's own rules refuse leaves no forecast to show; the rest is said after it.
        model_rules = [r for r in refusals if r.path.startswith(f"{NAMESPACE}:training.model")]
        if model_rules:
            raise ConfigError(model_rules)
    except (UsageError, UnknownPreset, files.UnknownStackError, ConfigError, yaml.YAMLError) as exc:
        print(f"forecast: {plain(exc, keep_newlines=True)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    result = stack_forecast(config)
    if result is None:
        print(
            f"forecast: stack {args.stack!r} declares no trainstack:training.model; add the section "
            "(docs/FORECAST.md) or give one with --set",
            file=sys.stderr,
        )
        return EXIT_DOES_NOT_FIT
    model = config.training.model
    notice = parameter_notice(model) if model is not None else None
    if notice:
        print(f"forecast: warning: {notice}", file=sys.stderr)
    shapes = invented_shapes(config)
    if shapes:
        print(f"forecast: {shapes}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.compare is not None:
        try:
            comparison = compare(config, [g for g in args.compare.split(",") if g.strip()])
        except CompareError as exc:
            print(f"forecast: {exc}", file=sys.stderr)
            return EXIT_BAD_INPUT
        assert comparison is not None  # the stack has a model section (checked above)
        if args.json:
            print(
                json.dumps({"options": [o._asdict() for o in comparison.options], **comparison.to_output()})
            )
        else:
            render_compare(args.stack, comparison)
        if args.png is not None and _drawn(lambda: compare_chart(args.stack, comparison, args.png)) != 0:
            return EXIT_BAD_INPUT
        return EXIT_FITS if comparison.cheapest is not None else EXIT_DOES_NOT_FIT
    try:
        cap, where = run_cap(args.stack, config, args.policy_dir)
    except (OSError, ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
        why = "nested too deep to read" if isinstance(exc, RecursionError) else exc
        print(f"forecast: policy/config/{args.stack}.json: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run_usd = round(result.cost.run_usd, 2)
    said = [str(r) for r in refusals]
    if args.json:
        print(json.dumps(result.to_output() | {"max_run_cost_usd": cap, "refused_by": said}, indent=2))
    else:
        render(args.stack, config, result, [*([f"--model {args.model}"] if args.model else []), *args.sets],
               explain=args.explain)  # fmt: skip
        verdict = (
            "within it" if run_usd <= cap else f"OVER it by ${run_usd - cap:,.2f}: scripts/up refuses the run"
        )
        print(f"run cap: ${cap:,.2f} ({where}); this run ${run_usd:,.2f}, {verdict}")
        if said:  # the forecast first, then what the stack's rules say of the stack it describes
            print(f"the stack's rules refuse it ({len(said)}; scripts/up and the preview stop here):")
            print("".join(f"  - {plain(line)}\n" for line in said), end="")
    if args.png is not None:
        memory = result.to_output()["memory_gb_per_gpu"]
        if _drawn(lambda: memory_chart(args.stack, memory, args.png)) != 0:
            return EXIT_BAD_INPUT
    if not result.memory.fits:
        return EXIT_DOES_NOT_FIT
    return EXIT_OVER_CAP if run_usd > cap or said else EXIT_FITS


def _drawn(draw: Callable[[], Path]) -> int:
    """Draw a picture: its path said on stderr, 0; a ChartError (no matplotlib) said, 2."""
    try:
        path = draw()
    except (ChartError, OSError) as exc:
        print(f"forecast: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"forecast: drew {path}", file=sys.stderr)
    return 0


def invented_shapes(config: StackConfig) -> str | None:
    """The line that refuses a forecast whose FFN width would be invented from a parameter count that does not
    match the shapes (issue #68: `--set parameters=70e9` on Llama-3-8B's shapes gave ffn_hidden_size 172032):
    None when the model gives its width, or the width the parameters leave is one a published model has."""
    from forecast.shapes import ffn_width

    data = forecast_input(config)
    if data is None or data.workload.ffn_hidden_size is not None or data.workload.block != "llama":
        return None
    w = data.workload
    ratio = ffn_width(w) / w.hidden_size
    if FFN_RATIO[0] <= ratio <= FFN_RATIO[1]:
        return None
    return (
        f"{NAMESPACE}:training.model: {w.parameters:.3g} parameters in {w.layers} layers of hidden size "
        f"{w.hidden_size} leave an FFN width of {ffn_width(w)}, {ratio:.1f} x the hidden size (published "
        f"models: {FFN_RATIO[0]:g}-{FFN_RATIO[1]:g} x), so the shapes are another model's; name the model "
        "(--model llama-3-70b; the presets: forecast/presets.py) or give its shapes too (layers, "
        "hidden_size, attention_heads, kv_heads, ffn_hidden_size)"
    )


# The SwiGLU FFN's width over the hidden size in published models: Llama 2 7B 2.7 (11008/4096), Llama 3
# 3.5 (14336/4096), Qwen2.5-7B 5.3 (18944/3584) (forecast/presets.py). Outside 2-6 the width is invented.
FFN_RATIO = (2.0, 6.0)


if __name__ == "__main__":
    sys.exit(main())
