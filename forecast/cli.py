"""`scripts/forecast STACK [--set key=value ...]`: a stack's forecast in the terminal, no Pulumi, no account.

Reads `stacks/Pulumi.<STACK>.yaml`, applies each `--set` (a key path under `trainstack:`, e.g.
`cluster.nodes=4`, `training.max_run_hours=48`; a bare model field such as `sharding=zero3` means
`training.model.sharding`), parses it exactly as `pulumi preview` would, and prints the breakdown.
It ends with the run cap the run will be held to, as the policy pack judges it: the run's one cost cap,
`trainstack:run.max_cost_usd` in the stack file (after any `--set run.max_cost_usd=...`), and the deprecated
`max_run_cost_usd` of the `run-cost-within-budget` policy in `policy/config/<STACK>.json`: the stricter of
the two when both are set, the one set when only one is, else that policy's default.
Exit status: 0 the model fits and the run is within its cap, 1 it does not fit (or the stack has no model
section), 2 bad config or usage, 3 it fits but the run costs more than its cap (`scripts/up` refuses it).
`--compare [GPU,...]` prints instead every GPU type, node count and sharding RunPod rents for the run,
cheapest run first, with the cheapest feasible one and its saving (forecast.compare); exit 0 when one fits.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from common.stackname import stack_name_problem
from common.terminal import plain
from forecast.compare import CompareError, compare
from forecast.stack import stack_forecast
from forecast.table import render, render_compare
from stackconfig import files
from stackconfig.config import NAMESPACE, ConfigError, StackConfig
from stackconfig.derived import run_cost_cap
from stackconfig.loader import load_stack_config
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
        for assignment in args.sets:
            raw = apply_set(raw, assignment)
        config = load_stack_config(raw)
    except (UsageError, files.UnknownStackError, ConfigError, yaml.YAMLError) as exc:
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
        return EXIT_FITS if comparison.cheapest is not None else EXIT_DOES_NOT_FIT
    try:
        cap, where = run_cap(args.stack, config, args.policy_dir)
    except (OSError, ValueError, RecursionError) as exc:  # pydantic's ValidationError is a ValueError
        why = "nested too deep to read" if isinstance(exc, RecursionError) else exc
        print(f"forecast: policy/config/{args.stack}.json: {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    run_usd = round(result.cost.run_usd, 2)
    if args.json:
        print(json.dumps(result.to_output() | {"max_run_cost_usd": cap}, indent=2))
    else:
        render(args.stack, config, result, args.sets, explain=args.explain)
        verdict = (
            "within it" if run_usd <= cap else f"OVER it by ${run_usd - cap:,.2f}: scripts/up refuses the run"
        )
        print(f"run cap: ${cap:,.2f} ({where}); this run ${run_usd:,.2f}, {verdict}")
    if not result.memory.fits:
        return EXIT_DOES_NOT_FIT
    return EXIT_OVER_CAP if run_usd > cap else EXIT_FITS


if __name__ == "__main__":
    sys.exit(main())
