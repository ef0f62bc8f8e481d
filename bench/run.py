"""One measured Pulumi command for `scripts/bench`: throwaway workspaces, wall time, requests, peak RSS.

`bench()` starts one local RunPod and moto for a run of benchmarks (`Bench`). A `Workspace` is a project
directory whose `main:` is the trainstack program (or a bench program under `bench/programs/`) and whose
stack file is written from a dict, on a throwaway file backend.
`Workspace.run` times one CLI command, diffs the local RunPod's request counters around it, and samples
the RSS of the whole process tree (CLI, language host, program, dynamic provider, policy pack) every 100 ms.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.stats import counter_diff, totals
from harness.local import LocalRunPod, MotoS3, start_local_runpod, start_moto_s3
from harness.pulumi_cli import REPO, Pulumi
from stackconfig import files

H100_STOCK = {
    f"NVIDIA H100 80GB HBM3@{dc}": 1_000_000 for dc in ("US-TX-3", "US-KS-2", "EU-RO-1", "CA-MTL-1")
}
# moto's documented test credentials; the other secrets get visible placeholders.
_DEMO_SECRETS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_and_role(pid: int) -> tuple[int, str]:
    """Resident KiB and a role name: pulumi (CLI), langhost, provider, policy, program or other."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return 0, "gone"
    rss = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    if "pulumi.dynamic" in cmdline or "trainstack_dynamic_host" in cmdline:
        return rss, "provider"
    if "policy" in cmdline and "python" in cmdline:
        return rss, "policy"
    if "pulumi-language-python-exec" in cmdline or "python" in cmdline.split(" ", 1)[0]:
        return rss, "program"
    if "pulumi-language" in cmdline or "pulumi-analyzer" in cmdline:
        return rss, "langhost"
    if cmdline.split(" ", 1)[0].endswith("pulumi"):
        return rss, "pulumi"
    return rss, "other"


class RssSampler(threading.Thread):
    """Peak RSS (MiB) of a process tree: the whole tree and each role, sampled every `period_s`."""

    def __init__(self, root_pid: int, period_s: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.root_pid, self.period_s = root_pid, period_s
        self.peak_total = 0.0
        self.peak_by_role: dict[str, float] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.sample()
            self._halt.wait(self.period_s)

    def sample(self) -> None:
        tree, todo, by_role = _children(), [self.root_pid], dict[str, float]()
        while todo:
            pid = todo.pop()
            todo.extend(tree.get(pid, []))
            rss, role = _rss_and_role(pid)
            by_role[role] = by_role.get(role, 0.0) + rss / 1024
        self.peak_total = max(self.peak_total, sum(by_role.values()))
        for role, mib in by_role.items():
            self.peak_by_role[role] = max(self.peak_by_role.get(role, 0.0), mib)

    def stop(self) -> None:
        self._halt.set()
        self.join()


class BenchFailed(RuntimeError):
    """A setup step, a measured command or a teardown of the benchmark failed: the benchmark stops and no
    figure of that run is reported (a failed `destroy` leaves the next `up` adopting, not creating)."""


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class Measurement:
    """One command: wall seconds, requests by endpoint and outcome, their totals, peak RSS in MiB."""

    command: str
    wall_s: float
    requests: dict[str, dict[str, int]]
    totals: dict[str, int]
    peak_rss_mib: float
    peak_rss_by_role: dict[str, float]
    ok: bool

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


@dataclass
class Workspace:
    """A stack in a throwaway project directory and file backend, wired to one local RunPod."""

    root: Path
    stack: str
    config: dict[str, Any]
    runpod: LocalRunPod
    env: dict[str, str]
    program: Path = REPO
    policy: bool = False
    policy_config: str | None = None  # stack whose policy/config/<stack>.json to use (default: this one)
    cli: Pulumi = field(init=False)

    def __post_init__(self) -> None:
        project = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
        project["runtime"].setdefault("options", {})["virtualenv"] = str(REPO / ".venv")
        project["main"] = str(self.program)
        project["stackConfigDir"] = "stacks"
        (self.root / "stacks").mkdir(parents=True, exist_ok=True)
        (self.root / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        stack_file = files.stack_path(self.stack, self.root / "stacks")
        stack_file.write_text(yaml.safe_dump({"config": self.config}, sort_keys=False))
        self.cli = Pulumi(project=self.root, state=self.root / "state", extra_env=self.env)
        self.cli.stack_init(self.stack)
        training = self.config.get("trainstack:training") or {}
        for name in training.get("secrets") or []:
            value = _DEMO_SECRETS.get(name, f"bench-{name.lower()}")
            self.cli.run(
                "config", "set", "--secret", "--stack", self.stack, f"trainstack:secrets.{name}", value
            )

    def _args(self, verb: str) -> list[str]:
        args = [verb, "--stack", self.stack, "--non-interactive"]
        if verb in ("up", "refresh", "destroy"):
            args.append("--yes")
        if self.policy and verb in ("up", "preview"):
            args += ["--policy-pack", str(REPO / "policy")]
            config = self.policy_config or self.stack
            args += ["--policy-pack-config", str(REPO / f"policy/config/{config}.json")]
        return args

    def run(self, verb: str, *extra: str, timeout_s: float = 1800, check: bool = True) -> Measurement:
        """Time one command; with `check`, a failed command raises BenchFailed with its log's tail."""
        before = self.runpod.admin.counters()["endpoints"]
        (self.cli.state / "backend").mkdir(parents=True, exist_ok=True)
        samplers: list[RssSampler] = []

        def sample(pid: int) -> None:
            samplers.append(RssSampler(pid))
            samplers[-1].start()

        started = time.perf_counter()
        try:
            done = self.cli.stack().cli(
                *self._args(verb), *extra, interactive=True,  # _args has --non-interactive
                workdir=self.root, timeout=timeout_s, merged=True, on_start=sample,
            )  # fmt: skip
        finally:
            for sampler in samplers:
                sampler.stop()
        sampler = samplers[0]
        wall = time.perf_counter() - started
        if not done.ok:
            (self.root / f"{verb}.log").write_text(done.output)
        diff = counter_diff(before, self.runpod.admin.counters()["endpoints"])
        if check and not done.ok:
            raise self.failed(verb, *extra)
        return Measurement(
            " ".join([verb, *extra]),
            round(wall, 3),
            diff,
            totals(diff),
            round(sampler.peak_total, 1),
            {k: round(v, 1) for k, v in sampler.peak_by_role.items() if k != "gone"},
            done.ok,
        )

    def failed(self, verb: str, *extra: str) -> BenchFailed:
        command = " ".join(["pulumi", verb, *extra, "--stack", self.stack])
        return BenchFailed(
            f"{command} failed; nothing is reported from this run:\n{_tail(self.root / f'{verb}.log')}"
        )


class Bench:
    """One local RunPod + moto, the scaled environment, and a temp root for workspaces."""

    def __init__(self, root: Path, scale: float, runpod: LocalRunPod, s3: MotoS3) -> None:
        self.root, self.scale, self.runpod, self.s3 = root, scale, runpod, s3
        self.count = 0

    def env(self) -> dict[str, str]:
        return self.runpod.env() | {
            "AWS_ENDPOINT_URL_S3": self.s3.endpoint_url,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "TRAINSTACK_OUT_DIR": str(self.root / "out"),
            "TRAINSTACK_POLL_INTERVAL_S": f"{10.0 / self.scale:g}",
            "RUNPOD_RATE_LIMIT_PER_MIN": str(round(60 * self.scale)),
            "PYTHONPATH": str(REPO),
            "PULUMI_PARALLEL": "64",  # as scripts/env.sh sets it for `scripts/up`
        }

    def workspace(self, stack: str, config: dict[str, Any], **kwargs: Any) -> Workspace:
        """A fresh workspace; a stack that protects its resources (prod) has protection off here, so the
        benchmark's own `destroy` can delete them and the next `up` creates instead of adopting."""
        if config.get("trainstack:protect"):
            config = config | {"trainstack:protect": False}
        self.count += 1
        self.runpod.admin.capacity(stock=H100_STOCK)
        self.runpod.admin.limits(spendLimit=1_000_000, balance=1_000_000_000)
        root = self.root / f"ws-{self.scale:g}-{self.count}-{stack}"
        return Workspace(root, stack, config, self.runpod, self.env(), **kwargs)


@contextmanager
def bench(root: Path, scale: float) -> Iterator[Bench]:
    args = ["--time-scale", f"{scale:g}", "--latency-model", "image", "--rate-per-minute", "60"]
    runpod = start_local_runpod(root / f"runpod-{scale:g}", *args)
    s3 = start_moto_s3(root / f"moto-{scale:g}.log")
    try:
        yield Bench(root, scale, runpod, s3)
    finally:
        s3.stop()
        runpod.stop()
