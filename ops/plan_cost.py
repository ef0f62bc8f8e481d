"""The line `scripts/up` prints before it asks to apply against the real RunPod: the stack's one hourly price
and its one run cost (stackconfig/pricing.py, forecast/stack.py), from its stack file alone.

    python -m ops.plan_cost STACK
    pulumi stack output --json | python -m ops.plan_cost --outputs

With --outputs it prints the same figures from the stack's outputs after an up (cost_per_hour, cost_per_run,
cost_per_run_basis): the line scripts/up ends with, since it hides Pulumi's long list of outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from forecast.stack import run_cost
from stackconfig import files
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config
from stackconfig.pricing import stack_price

REPO = Path(__file__).resolve().parents[1]


def cost_line(stack: str, stacks_dir: Path = REPO / "stacks") -> str:
    config = load_stack_config(files.without_secrets(files.read_config(stack, stacks_dir)))
    run = run_cost(config)
    return (
        f"'{stack}' costs ${stack_price(config).usd_per_hour:,.2f}/h; one run ${run.usd:,.2f} ({run.label})"
    )


def outputs_line(outputs: dict[str, Any]) -> str:
    """`$31.93/h; one run $4.51 (forecast: 0.1 h of training)` from a stack's outputs."""
    if not isinstance(outputs, dict):
        raise ValueError("the stack outputs are not a JSON object")
    per_hour, per_run = outputs.get("cost_per_hour"), outputs.get("cost_per_run")
    if not isinstance(per_hour, int | float) or not isinstance(per_run, int | float):
        raise ValueError("the stack has no cost_per_hour/cost_per_run outputs")
    basis = outputs.get("cost_per_run_basis")
    return f"${per_hour:,.2f}/h; one run ${per_run:,.2f}" + (f" ({basis})" if basis else "")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--outputs"]:
        try:
            print(outputs_line(json.loads(sys.stdin.read() or "{}")))
        except ValueError as exc:
            print(f"ops.plan_cost: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        print(f"scripts/up: {cost_line(argv[0])}", file=sys.stderr)
    except ConfigError as exc:
        print(f"scripts/up: stacks/Pulumi.{argv[0]}.yaml: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
