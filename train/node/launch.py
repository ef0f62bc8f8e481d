"""One torchrun launch per node boot: the preflight first, then (once the start script says go) training.

    torchrun <rendezvous args> -m train.node.launch --gate DIR [preflight options] -- <training command>

Every worker imports torch once. The preflight (train/node/preflight.py) runs in a child forked from the
worker: it inherits the import, initialises its own process group on a prefixed view of torchrun's store
(so training's group, made later under the store's usual keys, meets no key of it) and exits; the worker
itself never initialised CUDA or a process group, so the training command starts as in a fresh process,
torch already imported. A second torchrun launch per boot (an agent and a worker per GPU, each importing
torch) is what this saves: on the local RunPod's CPU nodes that was a third of a node boot's CPU.

The gate folder is the node's own (the workdir may be a volume every node mounts) and the start script's
protocol with the workers, all files written by the node's local rank 0:

    preflight.out   the preflight's report lines (TRAINSTACK_GEMM, TRAINSTACK_ALLREDUCE, ...), which the start
                    script logs
    passed          the preflight passed on every rank of the job (its verdicts are gathered to all ranks)
    failed          it did not: one line, the reason; every later restart of the group exits at once, so
                    torchrun's --max-restarts never retries a refused node into training
    go              written by the start script once the checkpoint is fetched from the bucket (the resume):
                    the workers wait for it, then run the training command

A restart of the worker group (torchrun --max-restarts, after training began) finds `passed` and `go` and
goes straight to training, as a second training launch did before. torch is imported here only when the
preflight runs, in the worker (`import_torch`): it exists on the nodes, not in the project's venv.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
import time
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from train.node.gcpause import collector_paused

STORE_PREFIX = "trainstack-preflight"  # the preflight's keys in torchrun's store: none of training's
POLL_S = 0.2  # how often a worker looks for `go`: a stat of a file, nothing else


@dataclass(frozen=True)
class Gate:
    """The node's gate folder (see the module's docstring)."""

    root: Path

    @property
    def out(self) -> Path:
        return self.root / "preflight.out"

    @property
    def passed(self) -> Path:
        return self.root / "passed"

    @property
    def failed(self) -> Path:
        return self.root / "failed"

    @property
    def go(self) -> Path:
        return self.root / "go"

    def mark(self, path: Path, text: str = "") -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)  # whole or absent: the start script polls for it


def fail_line(out: str) -> str | None:
    """The preflight's one failure line, as it printed it (`TRAINSTACK_FAIL <reason>`)."""
    for line in out.splitlines():
        if line.startswith("TRAINSTACK_FAIL "):
            return line.removeprefix("TRAINSTACK_FAIL ").strip()
    return None


def wait_for_go(gate: Gate, alive: Callable[[], bool], poll_s: float = POLL_S) -> bool:
    """Wait until the start script writes `go`; False when the agent that started this worker is gone."""
    while not gate.go.exists():
        if not alive():
            return False
        time.sleep(poll_s)
    return True


def training_argv(command: Sequence[str]) -> tuple[str, list[str]]:
    """What torchrun would run: ("module", argv) for `-m MODULE ARGS`, ("path", argv) for `SCRIPT ARGS`."""
    if not command:
        raise SystemExit("train.node.launch: no training command after --")
    if command[0] == "-m":
        if len(command) < 2:
            raise SystemExit("train.node.launch: -m needs a module name")
        return "module", [command[1], *command[2:]]
    return "path", list(command)


def run_training(command: Sequence[str]) -> None:
    """Run the training command in this process, as `python -u SCRIPT ARGS` or `python -u -m MODULE ARGS`."""
    kind, argv = training_argv(command)
    sys.argv = argv
    if kind == "module":
        runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        return
    script = Path(argv[0])
    sys.path.insert(0, str(script.resolve().parent))  # what python does for a script
    runpy.run_path(str(script), run_name="__main__")


def import_torch() -> None:
    """`import torch` with the cyclic garbage collector paused, then its objects frozen out of later passes.
    The import makes some hundred thousand objects, none of them garbage, and the collector's passes over
    them while they are made are a fifth of its CPU; frozen, no later pass walks them again (a training
    command's later imports included), and a forked child (the preflight) leaves their pages shared.
    Measured on the local RunPod's CPU nodes, paired runs, CPU-s: `import torch, torch.distributed`
    2.78 -> 2.11; with `torch._dynamo` after it (which train/train.py no longer imports), 4.80 -> 3.68."""
    with collector_paused():
        import torch
        import torch.distributed  # noqa: F401


def _preflight_in_child(gate: Gate, argv: list[str], lead: bool) -> int:
    """Fork, run the preflight in the child on the store's prefixed view, return its exit status."""
    import_torch()  # before the fork: the child inherits it, the training command reuses it

    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            if lead:  # the report lines go to the gate folder; other ranks print none
                fd = os.open(gate.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(fd, 1)
                os.close(fd)
            os.environ["TRAINSTACK_PREFLIGHT_STORE_PREFIX"] = STORE_PREFIX
            from train.node import preflight

            code = preflight.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # the child must end here, whatever happened
            print(f"TRAINSTACK_FAIL preflight crashed: {type(exc).__name__}: {exc}", flush=True)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _args(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    argv = list(argv)
    if "--" not in argv:
        raise SystemExit("train.node.launch: give the training command after --")
    cut = argv.index("--")
    p = argparse.ArgumentParser(
        prog="python -m train.node.launch", description=__doc__.splitlines()[0], allow_abbrev=False
    )
    p.add_argument("--gate", type=Path, required=True, help="the node's gate folder")
    args, preflight_argv = p.parse_known_args(argv[:cut])
    return args, preflight_argv, argv[cut + 1 :]


def pg_timeout_env(env: MutableMapping[str, str] | None = None) -> None:
    """TRAINSTACK_PG_TIMEOUT_S for the job's init_process_group, from the pace the node's watchdog learned
    (train/node/hang.py pg_timeout_s), read at each (re)start; a job that sets its own keeps it."""
    if env is None:
        env = os.environ
    pace = env.get("TRAINSTACK_PACE_FILE")
    if not pace or env.get("TRAINSTACK_PG_TIMEOUT_S"):
        return
    from train.node import hang
    from train.node.watchdog import read_timeout

    try:
        bounds = hang.bounds_from_env(dict(env))
    except ValueError:
        bounds = hang.Bounds()  # the agent refuses the value and says so; the job is not the place
    env["TRAINSTACK_PG_TIMEOUT_S"] = f"{read_timeout(Path(pace), bounds):.0f}"


def mark_start(env: MutableMapping[str, str] | None = None) -> None:
    """Tell the node's watchdog that the worker group (re)starts (`<pace file>.start`, the restart count):
    a restart torchrun made on its own (a crashed rank) is then held to the restart's bound, not a step's."""
    if env is None:
        env = os.environ
    pace = env.get("TRAINSTACK_PACE_FILE")
    if pace and env.get("LOCAL_RANK", "0") == "0":
        tmp = Path(f"{pace}.start.tmp")
        with contextlib.suppress(OSError):  # without it the watchdog holds a restart to the step's bound
            tmp.write_text(env.get("TORCHELASTIC_RESTART_COUNT", "0"))
            tmp.replace(f"{pace}.start")


def main(argv: Sequence[str] | None = None) -> int:
    args, preflight_argv, command = _args(sys.argv[1:] if argv is None else argv)
    training_argv(command)  # a bad command fails before the preflight, not after it
    gate = Gate(args.gate)
    lead = os.environ.get("LOCAL_RANK", "0") == "0"
    if gate.failed.exists():
        print(f"train.node.launch: the preflight refused this node ({gate.failed.read_text().strip()})")
        return 1
    if not gate.passed.exists():
        status = _preflight_in_child(gate, preflight_argv, lead)
        if status != 0:
            if lead:
                out = gate.out.read_text(errors="replace") if gate.out.exists() else ""
                gate.mark(gate.failed, fail_line(out) or f"preflight failed (exit {status}); see above")
            return 1
        if lead:
            gate.mark(gate.passed)
    agent = os.getppid()
    if not wait_for_go(gate, lambda: os.getppid() == agent):
        return 1
    pg_timeout_env()
    mark_start()
    run_training(command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
