"""A round's observation: the stack's config and outputs, node 0's aggregator, RunPod billing, the bucket.

Node 0 and billing are read with scripts/watch's own sources (watch/sources.py) and joined by its snapshot
(watch/snapshot.py), so the supervisor sees a node exactly as `scripts/watch` shows it. Every source but the
stack's outputs and config may fail on its own; a failure is one line of `problems`, and the decision then
knows what it does not know (blind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.render import stack_run_ids
from stackconfig.config import StackConfig, load_stack_config
from supervisor import faults
from supervisor.model import Observation, RunState
from supervisor.store import verify_run
from watch import snapshot, sources

SECRET_CONFIG_PREFIX = "trainstack:secrets."  # noqa: S105 (a key prefix; these values are never read)


class StackUnreadable(sources.WatchError):
    """The stack's outputs or config cannot be read: the supervisor never acts on such a stack (exit 2)."""


@dataclass(frozen=True)
class Sources:
    """The seams a round reads through; tests pass fakes, `scripts/supervise` the defaults."""

    aggregator: Callable[[str, Mapping[str, Any]], dict[str, Any]] = sources.aggregator_state
    billing: Callable[..., float] = sources.billed_usd  # (outputs, replaced=ids) -> USD
    s3: Any = None  # a boto3 S3 client; None: the run states are not read (no bucket)
    pod_statuses: Callable[[Sequence[str]], Mapping[str, faults.PodStatus]] = faults.pod_statuses


def stack_config(raw: Mapping[str, Any], warn: Callable[[str], None] = lambda _msg: None) -> StackConfig:
    """The `trainstack:*` config from `pulumi config --json` shaped values ({key: {"value": ...}})."""
    values = {
        key: (entry.get("value") if isinstance(entry, Mapping) else entry)
        for key, entry in raw.items()
        if key.startswith("trainstack:") and not key.startswith(SECRET_CONFIG_PREFIX)
    }
    return load_stack_config({k: v for k, v in values.items() if v is not None}, warn=warn)


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def observe(
    stack: str, config: StackConfig, outputs: Mapping[str, Any], now: float, src: Sources
) -> Observation:
    """Read node 0, billing and the run states once; join them the way scripts/watch does."""
    problems: list[str] = []
    nodes = [n for n in outputs.get("nodes") or [] if isinstance(n, Mapping)]
    state: dict[str, Any] | None = None
    answered = False
    if nodes:
        try:
            state = src.aggregator(stack, outputs)
            answered = True
        except sources.NoStateError as exc:
            answered = True
            problems.append(f"aggregator: {exc}")
        except sources.WatchError as exc:
            problems.append(f"aggregator: {exc}")
    attempts: list[faults.Attempt] = []
    if src.s3 is not None and config.bucket is not None and nodes:
        from supervisor.recover_act import read_attempts

        since = now - config.training.max_run_hours * 3600  # a run is never longer: older ones were another
        attempts = read_attempts(src.s3, config.bucket.name, stack, since)
    billed: float | None = None
    try:
        # The clusters and pods this run's recoveries replaced bill under their own ids: read them too.
        replaced = tuple(dict.fromkeys(r for a in attempts for r in a.replaced))
        billed = src.billing(outputs, replaced=replaced)
    except Exception as exc:  # any failure of billing is a problem line, never the round's end
        problems.append(f"billing: {type(exc).__name__}: {exc}")
    forecast = outputs.get("forecast") if isinstance(outputs.get("forecast"), Mapping) else {}
    snap = snapshot.build(
        stack=stack,
        now=now,
        outputs=outputs,
        aggregator=state,
        billed_usd=billed,
        forecast_usd=_num((forecast or {}).get("run_cost_usd")),
        logs={},
        problems=problems,
        node0_answered=answered,
    )
    utils = [n.gpu_util_mean for n in snap.nodes if n.gpu_util_mean is not None]
    steps = [n.step for n in snap.nodes if n.step is not None]
    saving = [n.checkpoint_s for n in snap.nodes if n.checkpoint_s is not None]
    checks = [n.health_s for n in snap.nodes if n.health_s is not None]
    runs: tuple[RunState, ...] = ()
    if src.s3 is not None and config.bucket is not None and nodes:
        pod_ids = [str(n.get("pod_id")) for n in nodes]
        boots = [int(n.get("boot") or 0) for n in nodes]  # a pod started again after release_mode stop
        ids = stack_run_ids(stack, config.cluster.topology, pod_ids, boots)
        runs = tuple(verify_run(src.s3, config.bucket.name, run_id) for run_id in ids)
    fleet, runs = _fleet(config, snap, nodes, runs, attempts, src, problems)
    return Observation(
        at=now,
        phase=config.run.phase,
        nodes=len(nodes),
        node0_reachable=answered if nodes else None,
        aggregator_age_s=snap.aggregator_age_s,
        gpu_util_max=max(utils) if utils else None,
        step=max(steps) if steps else None,
        spent_usd=billed,
        usd_per_hour=snap.money.cost_per_hour_usd,
        forecast_usd=snap.money.forecast_usd,
        runs=runs,
        problems=tuple(problems),
        fleet=fleet,
        checkpoint_s=max(saving) if saving else None,
        health_s=max(checks) if checks else None,
    )


def _fleet(
    config: StackConfig,
    snap: snapshot.WatchSnapshot,
    nodes: Sequence[Mapping[str, Any]],
    runs: tuple[RunState, ...],
    attempts: list[faults.Attempt],
    src: Sources,
    problems: list[str],
) -> tuple[faults.Fleet | None, tuple[RunState, ...]]:
    """Issue #29: each node, its pod's status, the run's recoveries; run states a recovery answered drop."""
    if not config.recovery.enabled or not nodes:
        return None, runs
    statuses: Mapping[str, faults.PodStatus] = {}
    try:
        statuses = src.pod_statuses([str(n.get("pod_id")) for n in nodes])
    except Exception as exc:  # a status is one more source; its failure is a problem line
        problems.append(f"pod status: not read ({type(exc).__name__})")
    spot = config.cluster.capacity != "on_demand"
    fleet = faults.fleet_of(
        config.cluster.topology, config.cluster.data_centers, snap.nodes, statuses, spot, attempts
    )
    return fleet, faults.current_runs(runs, attempts)


def read_stack(workspace: Path, stack: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(outputs, raw config) of the stack, or StackUnreadable naming what could not be read."""
    import json
    import subprocess

    try:
        outputs = sources.stack_outputs(workspace, stack, require_nodes=False)
        proc = subprocess.run(
            ["pulumi", "config", "--json", "--stack", stack, "--non-interactive"],
            cwd=workspace,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except sources.WatchError as exc:
        raise StackUnreadable(str(exc)) from None
    except OSError as exc:  # no pulumi on PATH, or no such workspace
        raise StackUnreadable(f"cannot run pulumi in {workspace} ({exc}); . scripts/env.sh first") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise StackUnreadable(f"cannot read the config of stack '{stack}' in {workspace}: {last}")
    try:
        raw = json.loads(proc.stdout or "{}")
    except ValueError:
        raise StackUnreadable(f"pulumi printed no JSON for the config of '{stack}'") from None
    return outputs, raw
