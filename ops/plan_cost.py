"""The line `scripts/up` prints before it asks to apply against the real RunPod: the stack's one hourly price
and its one run cost (components/price.py), from its stack file alone.

    python -m ops.plan_cost STACK
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from components.price import run_cost, stack_price

from stackconfig.config import ConfigError, load_stack_config

REPO = Path(__file__).resolve().parents[1]


def cost_line(stack: str, stacks_dir: Path = REPO / "stacks") -> str:
    raw = yaml.safe_load((stacks_dir / f"Pulumi.{stack}.yaml").read_text()) or {}
    config = load_stack_config(dict(raw.get("config") or {}))
    run = run_cost(config)
    return (
        f"'{stack}' costs ${stack_price(config).usd_per_hour:,.2f}/h; one run ${run.usd:,.2f} ({run.label})"
    )


def main(argv: list[str]) -> int:
    try:
        print(f"scripts/up: {cost_line(argv[0])}", file=sys.stderr)
    except ConfigError as exc:
        print(f"scripts/up: stacks/Pulumi.{argv[0]}.yaml: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
