"""Render a one-node variant of a stack for a GPU validation run, with a runner for the GPU machine.

    python -m scripts.gpu_validate --gpus 1 --out .gpu-run      # renders here (needs the venv)
    bash .gpu-run/run.sh "$OUT"                                  # runs there (needs bash, python3 + torch)

The variant is the `dev` stack's config with `gpus_per_node` changed, rendered by the same pure functions
`pulumi up` uses (components/render.py) for a node at 127.0.0.1, so what runs on the GPU is exactly what a
node would receive. The runner does a preflight and a training run, stops it with SIGTERM after a
checkpoint (as a spot preemption would), starts the script again and checks that training resumed from
the newest checkpoint. Checkpoints stay in a local directory: the GPU machine has no S3 endpoint.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml

from components.config import load_stack_config
from components.render import Node, render_artifacts

REPO = Path(__file__).resolve().parents[1]

RUNNER = REPO / "scripts" / "gpu-run.sh"


def variant_config(stack: str, gpus: int) -> dict[str, Any]:
    """The stack's `trainstack:*` config with one node of `gpus` GPUs, as Pulumi would hand it over."""
    raw = yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    config = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("trainstack:")}
    cluster = dict(config["cluster"])
    cluster.update(nodes=1, gpus_per_node=gpus, topology="pods")
    config["cluster"] = cluster
    return {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in config.items()}


def render(stack: str, gpus: int, out: Path) -> list[Path]:
    config = load_stack_config(variant_config(stack, gpus))
    node = Node(rank=0, ip="127.0.0.1", pod_id="gpu-validation", ssh_host="127.0.0.1", ssh_port=22)
    artifacts = render_artifacts(f"{stack}-gpu{gpus}", config, [node])
    if out.exists():
        shutil.rmtree(out)
    (out / "work").mkdir(parents=True)
    shutil.copytree(REPO / "train", out / "work" / "train", ignore=shutil.ignore_patterns("__pycache__"))
    written = []
    for name, text in {**artifacts.files(), "run.sh": RUNNER.read_text()}.items():
        path = out / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scripts.gpu_validate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--out", type=Path, default=REPO / ".gpu-run")
    args = parser.parse_args(argv)
    for path in render(args.stack, args.gpus, args.out):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
