"""Render variants of a stack for GPU validation runs, with the runners for the GPU machine.

    python -m bench.gpu_validate --gpus 1 --out .gpu-run      # one node (renders here; needs the venv)
    bash .gpu-run/run.sh "$OUT"                                  # runs there (needs bash, python3 + torch)
    python -m bench.gpu_validate --plan x2 --out DIR           # everything for a 2-GPU host, then there:
    bash DIR/x2.sh "$OUT"                                        # (bench/gpu/x2.sh)

A variant is the `dev` stack's config with the cluster's shape (and, for the transformer, the training
command) changed, rendered by the same pure functions `pulumi up` uses (components/render.py) for nodes at
127.0.0.1, so what runs on the GPU is exactly what a node would receive. The runners do a preflight and a
training run, stop it with SIGTERM after a checkpoint (as a spot preemption would), start the scripts
again and check that training resumed from the newest checkpoint. Checkpoints stay in local directories:
the GPU machine has no S3 endpoint.

A 2-node variant (`--nodes 2`) is an Instant Cluster shape RunPod does not rent (1 GPU a node; its nodes are
whole 8-GPU machines), so the config rules that refuse it are bypassed here by copying the parsed config:
both nodes then share one host, each pinned to its own GPU, rank 0 the master at 127.0.0.1.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path

from components.render import Node, render_artifacts
from stackconfig import files
from stackconfig.config import StackConfig

REPO = Path(__file__).resolve().parents[1]
# The GPU machine's runners (bench/gpu/), copied beside what they run under the same names.
RUNNERS = REPO / "bench" / "gpu"

# The transformer job of the 2-GPU plan (train/gpt_train.py): 124M parameters across the two nodes
# (checkpoints of 1.5 GB save in seconds), FSDP on the 2-GPU node so that its resume is proven too. Over
# NVLink a 2-node step takes ~35 ms: 60 steps ended before the runner's SIGTERM once, hence 120.
GPT_2NODE = (
    "train/gpt_train.py --model gpt-124m --micro-batch 8 --steps 120 --checkpoint-every 40 --log-every 10"
)
GPT_1NODE = (
    "train/gpt_train.py --model gpt-124m --micro-batch 8 --steps 60 --checkpoint-every 20 --log-every 10 "
    "--sharding fsdp"
)


def variant(stack: str, nodes: int, gpus: int, command: str | None) -> StackConfig:
    """The stack's parsed config: `nodes` x `gpus` (cluster topology for 2+ nodes), `command`, no secrets."""
    config = files.load(stack)
    topology = "cluster" if nodes > 1 else "pods"
    cluster = config.cluster.model_copy(update={"nodes": nodes, "gpus_per_node": gpus, "topology": topology})
    # The GPU machine gets no RunPod secrets (the stack's AWS keys are for the bucket it cannot reach either).
    training = config.training.model_copy(update={"secrets": ()})
    if command:
        training = training.model_copy(update={"command": tuple(shlex.split(command))})
    return config.model_copy(update={"cluster": cluster, "training": training})


def render(stack: str, nodes: int, gpus: int, out: Path, command: str | None = None) -> list[Path]:
    """Write the start scripts, hostfile, hosts, the job's train/ under work/, and the runners into `out`."""
    config = variant(stack, nodes, gpus, command)
    node_list = [
        Node(rank=r, ip="127.0.0.1", pod_id=f"gpu-validation-{r}", ssh_host="127.0.0.1", ssh_port=22)
        for r in range(nodes)
    ]
    artifacts = render_artifacts(f"{stack}-gpu{nodes}x{gpus}", config, node_list)
    if out.exists():
        shutil.rmtree(out)
    (out / "work").mkdir(parents=True)
    shutil.copytree(REPO / "train", out / "work" / "train", ignore=shutil.ignore_patterns("__pycache__"))
    runners = {name: (RUNNERS / name).read_text() for name in ("run.sh", "run-2node.sh")}
    written = []
    for name, text in {**artifacts.files(), **runners}.items():
        path = out / name
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
        written.append(path)
    return written


def render_x2(stack: str, out: Path) -> list[Path]:
    """The 2-GPU plan: a 2-node job (one GPU each) and a 1-node 2-GPU job, and x2.sh that runs them all."""
    if out.exists():
        shutil.rmtree(out)
    written = render(stack, 2, 1, out / "two-nodes", GPT_2NODE)
    written += render(stack, 1, 2, out / "one-node", GPT_1NODE)
    runner = out / "x2.sh"
    runner.write_text((RUNNERS / "x2.sh").read_text())
    runner.chmod(0o755)
    return [*written, runner]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_validate", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="dev")
    parser.add_argument("--gpus", type=int, default=1, help="GPUs per node")
    parser.add_argument("--nodes", type=int, default=1)
    parser.add_argument("--command", help="torchrun's script and arguments (default: the stack's)")
    parser.add_argument("--plan", choices=("x2",), help="render everything the 2-GPU host runs")
    parser.add_argument("--out", type=Path, default=REPO / ".gpu-run")
    args = parser.parse_args(argv)
    if args.nodes < 1 or args.gpus < 1:
        parser.error("--nodes and --gpus must be at least 1")
    if args.plan == "x2":
        paths = render_x2(args.stack, args.out)
    else:
        paths = render(args.stack, args.nodes, args.gpus, args.out, args.command)
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
