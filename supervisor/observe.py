"""A round's observation: the stack's config and outputs, node 0's aggregator, RunPod billing, the bucket.

Node 0 and billing are read with the sources scripts/watch reads too (stackview/sources.py) and joined by
their snapshot (stackview/snapshot.py), so the supervisor sees a node exactly as `scripts/watch` shows it.
Every source but the stack's outputs and config may fail on its own; a failure is one line of `problems`,
and the decision then knows what it does not know (blind).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import pulumi
from common.outputs import NodeOutput
from common.stack import Stack
from components.render import stack_run_ids
from components.slurm import slurm_job_name
from stackconfig.config import StackConfig
from stackconfig.loader import load_stack_config
from stackview import snapshot, sources
from supervisor import faults
from supervisor.model import ExitFacts, Observation, RunState
from supervisor.slurm import SlurmJob, Source, latest, queue_reading, read_jobs, slurm_exits
from supervisor.store import read_attempts, verify_run

SECRET_CONFIG_PREFIX = "trainstack:secrets."  # noqa: S105 (a key prefix; these values are never read)


class StackUnreadable(sources.WatchError):
    """The stack's outputs or config cannot be read: the supervisor never acts on such a stack (exit 2)."""


def _ssh_key() -> bool:
    from providers.delivery.ssh import key_available

    return key_available()


def _no_exits(_stack: str, _outputs: Mapping[str, Any], _pods: Sequence[str]) -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True)
class Sources:
    """The seams a round reads through; tests pass fakes, `scripts/supervise` the defaults."""

    aggregator: Callable[[str, Mapping[str, Any]], dict[str, Any]] = sources.aggregator_state
    billing: Callable[..., float] = sources.billed_usd  # (outputs, replaced=ids) -> USD
    s3: Any = None  # a boto3 S3 client; None: the run states are not read (no bucket)
    pod_statuses: Callable[[Sequence[str]], Mapping[str, faults.PodStatus]] = faults.pod_statuses
    # the exit records of nodes whose start script ended, over SSH (stack, outputs, pod ids)
    exits: Callable[[str, Mapping[str, Any], Sequence[str]], Mapping[str, Any]] = sources.exit_records
    ssh_key: Callable[[], bool] = _ssh_key
    # a `scheduler: slurm` stack: `scontrol show job -o` on its controller (stack, outputs)
    slurm: Callable[[str, Mapping[str, Any]], str] = sources.slurm_jobs
    # the supervisor's own records (client, bucket): the checkpoint bucket, or a local directory without one
    memory: tuple[Any, str] | None = None


def stack_config(raw: Mapping[str, Any], warn: Callable[[str], None] = lambda _msg: None) -> StackConfig:
    """The `trainstack:*` config from `pulumi config --json` shaped values ({key: {"value": ...}})."""
    values = {
        key: value
        for key, value in pulumi.plain_config(raw).items()  # secrets dropped the one way
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
    nodes = sources.stack_nodes(stack, outputs)
    state: dict[str, Any] | None = None
    answered = False
    has_key = bool(nodes) and src.ssh_key()
    if nodes and not has_key:
        problems.append("ssh: the supervisor has no SSH key (TRAINSTACK_SSH_KEY, an agent or ~/.ssh/id_*)")
    if has_key:
        try:
            state = src.aggregator(stack, outputs)
            answered = True
        except sources.NoStateError as exc:
            answered = True
            problems.append(f"aggregator: {exc}")
        except sources.WatchError as exc:
            problems.append(f"aggregator: {exc}")
    attempts: list[faults.Attempt] = []
    memory = src.memory or ((src.s3, config.bucket.name) if src.s3 is not None and config.bucket else None)
    if memory is not None and nodes:
        since = now - config.training.max_run_hours * 3600  # a run is never longer: older ones were another
        attempts = read_attempts(memory[0], memory[1], stack, since)
    billed: float | None = None
    try:
        # The clusters and pods this run's recoveries replaced bill under their own ids: read them too.
        replaced = tuple(dict.fromkeys(r for a in attempts for r in a.replaced))
        billed = src.billing(outputs, replaced=replaced)
    except Exception as exc:  # any failure of billing is a problem line, never the round's end
        problems.append(f"billing: {type(exc).__name__}: {exc}")
    forecast_usd = sources.forecast_run_cost(outputs, problems)
    snap = snapshot.build(
        stack=stack,
        now=now,
        outputs=outputs,
        aggregator=state,
        billed_usd=billed,
        forecast_usd=forecast_usd,
        logs={},
        problems=problems,
        node0_answered=answered,
    )
    utils = [n.gpu_util_mean for n in snap.nodes if n.gpu_util_mean is not None]
    steps = [n.step for n in snap.nodes if n.step is not None]
    saving = [n.checkpoint_s for n in snap.nodes if n.checkpoint_s is not None]
    checks = [n.health_s for n in snap.nodes if n.health_s is not None]
    ids: tuple[str, ...] = ()
    if src.s3 is not None and config.bucket is not None and nodes:
        run_pods = [n.pod_id for n in nodes]
        boots = [n.boot for n in nodes]  # a pod started again after release_mode stop
        ranks = [n.rank for n in nodes]  # a pool's index: gaps where one ended
        job = slurm_job_name(stack, config)  # a cluster's job: the stack's name, or the Slurm job's
        ids = tuple(stack_run_ids(job, config.cluster.topology, run_pods, boots, ranks))
    restarts: tuple[faults.NodeRestart, ...] = ()
    if config.recovery.enabled and src.s3 is not None and config.bucket is not None:
        pool = config.cluster.topology == "pods"
        trials: list[int | None] = [n.rank for n in nodes] if pool else [None]  # stack_run_ids' order
        restarts = node_restarts(src.s3, config.bucket.name, ids, trials, problems)
    hosts: tuple[str, ...] = ()
    if src.s3 is not None and config.bucket is not None and nodes:
        hosts = failed_hosts(src.s3, config.bucket.name, now - config.training.max_run_hours * 3600, problems)
    pod_ids = tuple(n.pod_id for n in nodes)
    statuses: Mapping[str, faults.PodStatus] = {}
    if nodes:
        try:  # one listing: the fleet's statuses and the compute's age (the cap's bound without billing)
            statuses = src.pod_statuses(list(pod_ids))
        except Exception as exc:  # a status is one more source; its failure is a problem line
            problems.append(f"pod status: not read ({type(exc).__name__})")
    created = [s[2] for s in statuses.values() if s[2] is not None]
    # The exit records before the run states: a start script writes its run state (rank 0) before its exit
    # record, so a state read after an exit record is at least as new as that node's end. Read the other
    # way round, a round that straddles the job's end sees the nodes ended and the state still running.
    exits = _exits(stack, config, outputs, ids, pod_ids, has_key, answered, src, problems)
    runs: tuple[RunState, ...] = ()
    if src.s3 is not None and config.bucket is not None:
        runs = tuple(verify_run(src.s3, config.bucket.name, run_id) for run_id in ids)
    slurm_queue: str | None = None
    own: SlurmJob | None = None
    if config.cluster.scheduler == "slurm" and has_key and answered:
        read = _slurm_jobs(src.slurm(stack, outputs))
        if read is not None:  # neither sacct nor scontrol answered: no word on the queue
            jobs, source = read
            slurm_queue = queue_reading(jobs)
            own = latest(jobs, slurm_job_name(stack, config))
            exits += slurm_exits(slurm_job_name(stack, config), jobs, pod_ids, exits)
            if source == "scontrol":
                problems.append("slurm: sacct did not answer (no slurmdbd?): jobs read with scontrol")
    fleet, runs = _fleet(config, snap, nodes, runs, attempts, statuses, problems, restarts)
    agg_round = (state or {}).get("time")
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
        aggregator_round=_num(agg_round),
        pods=pod_ids,
        ranks=tuple(n.rank for n in nodes),
        node_steps=tuple(n.step for n in snap.nodes),
        topology=config.cluster.topology,
        exits=exits,
        ssh_key=has_key or not nodes,
        created_at=min(created) if created else None,
        slurm_queue=slurm_queue,
        slurm_job=own.job_id if own else None,
        slurm_state=own.state if own else None,
        failed_hosts=hosts,
    )


def _slurm_jobs(text: str) -> tuple[tuple[SlurmJob, ...], Source] | None:
    """slurm_jobs' answer (stackview/sources.py) split at its marks: sacct's part where sacct answered,
    scontrol's where it did (supervisor/slurm.py `read_jobs` prefers sacct)."""
    sacct, _, rest = text.partition(sources.SACCT_READ) if sources.SACCT_READ in text else (None, "", text)
    scontrol = rest if sources.SLURM_READ in rest else None
    return read_jobs(sacct, scontrol)


def _exits(
    stack: str,
    config: StackConfig,
    outputs: Mapping[str, Any],
    run_ids: Sequence[str],
    pod_ids: Sequence[str],
    has_key: bool,
    node0_answered: bool,
    src: Sources,
    problems: list[str],
) -> tuple[ExitFacts, ...]:
    """each ended start script's exit record, from the bucket (`run/<run id>/exit/<rank>.json`, a
    failed node's) and, for every node the bucket had none of, over SSH while node 0 answers (a stack without
    a bucket too), all nodes at once: whatever the aggregator's file says of a node (a stale one says it
    answered after its start script ended, issue #63), the node's own record is read."""
    from train.node import exitrecord

    by_pod: dict[str, ExitFacts] = {}

    def add(record: exitrecord.ExitRecord, pod_id: str) -> None:
        by_pod[pod_id] = ExitFacts(
            rank=record.rank,
            pod_id=pod_id,
            status=record.status,
            phase=record.phase,
            exit_status=record.exit_status,
            reason=record.reason,
            log_tail=tuple(record.log_tail),
            run_id=record.run_id,
            at=record.at,
        )

    if src.s3 is not None and config.bucket is not None:
        for run_id in run_ids:
            prefix = f"run/{run_id}/exit/"
            try:
                listed = src.s3.list_objects_v2(Bucket=config.bucket.name, Prefix=prefix).get("Contents", [])
                for obj in listed[:64]:
                    body = src.s3.get_object(Bucket=config.bucket.name, Key=obj["Key"])["Body"].read()
                    record = exitrecord.parse(body[:65536])
                    if record is not None and record.node in pod_ids:
                        add(record, record.node)
            except Exception as exc:  # the bucket is one more source; its failure is a problem line
                problems.append(f"exit records: bucket not read ({type(exc).__name__})")
                break
    unread = [p for p in pod_ids if p not in by_pod]
    if has_key and node0_answered and unread:
        # All at once: a node that does not answer costs its SSH timeout, not the sum of them (prod's 8).
        from concurrent.futures import ThreadPoolExecutor

        def one(pod_id: str) -> Mapping[str, Any]:
            return src.exits(stack, outputs, [pod_id])

        try:
            with ThreadPoolExecutor(max_workers=min(16, len(unread))) as pool:
                for found in pool.map(one, unread):
                    for pod_id, record in found.items():
                        add(record, pod_id)
        except Exception as exc:
            problems.append(f"exit records: not read over SSH ({type(exc).__name__})")
    return tuple(by_pod[p] for p in pod_ids if p in by_pod)


def node_restarts(
    s3: Any, bucket: str, run_ids: Sequence[str], trials: Sequence[int | None], problems: list[str]
) -> tuple[faults.NodeRestart, ...]:
    """The restarts the nodes' own watchdogs made in this run's jobs (`run/<run id>/node-restarts/`,
    train/node/watchdog.py), each with its trial (a pool's pod index; None: a cluster's job). The bucket is
    one more source: a failure to read it, or a record that does not parse, is a problem line."""
    import json

    found: list[faults.NodeRestart] = []
    for run_id, trial in zip(run_ids, trials, strict=False):
        try:
            listed = s3.list_objects_v2(Bucket=bucket, Prefix=f"run/{run_id}/node-restarts/").get(
                "Contents", []
            )
            for obj in listed[:256]:
                body = s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()
                try:
                    data = json.loads(body[:65536])
                    at = data["at"]
                    if not isinstance(at, int | float) or isinstance(at, bool):
                        raise TypeError("at")
                    node, cause = str(data["node"]), str(data.get("cause") or "?")
                except (ValueError, KeyError, TypeError):
                    problems.append(f"node restarts: {obj['Key']} does not parse: counted as one")
                    node, cause, at = "?", "?", 0.0
                found.append(faults.NodeRestart(obj["Key"], node, cause, float(at), trial))
        except Exception as exc:  # the bucket is one more source; its failure is a problem line
            problems.append(f"node restarts: bucket not read ({type(exc).__name__})")
            break
    return tuple(found)


def failed_hosts(s3: Any, bucket: str, since: float, problems: list[str]) -> tuple[str, ...]:
    """The hosts that failed in this run (a record since `since`, the run's longest start; one without a
    time too), one line each for the summary's support ticket. A bucket not read is a problem line."""
    from train.node import hostid

    try:
        records = hostid.read_failed(s3, bucket)
    except Exception as exc:  # the bucket is one more source; its failure is a problem line
        problems.append(f"failed hosts: bucket not read ({type(exc).__name__})")
        return ()
    lines = []
    for rec in records:
        at = rec.get("at")
        if isinstance(at, int | float) and not isinstance(at, bool) and at < since:
            continue
        gpus = ", ".join(str(u) for u in rec.get("gpu_uuids") or ()) or "no GPU UUID"
        lines.append(f"{gpus} (pod {rec.get('pod') or '?'}: {rec.get('reason') or '?'})")
    return tuple(sorted(lines))


def _fleet(
    config: StackConfig,
    snap: snapshot.WatchSnapshot,
    nodes: Sequence[NodeOutput],
    runs: tuple[RunState, ...],
    attempts: list[faults.Attempt],
    statuses: Mapping[str, faults.PodStatus],
    problems: list[str],
    restarts: Sequence[faults.NodeRestart] = (),
) -> tuple[faults.Fleet | None, tuple[RunState, ...]]:
    """each node, its pod's status, the run's recoveries; run states a recovery answered drop."""
    if not config.recovery.enabled or not nodes:
        return None, runs
    spot = config.cluster.capacity != "on_demand"
    fleet = faults.fleet_of(
        config.cluster.topology, config.cluster.data_centers, snap.nodes, statuses, spot, attempts, restarts
    )
    return fleet, faults.current_runs(runs, attempts)


def read_stack(workspace: Path, stack: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(outputs, raw config) of the stack, or StackUnreadable naming what could not be read."""
    try:
        outputs = sources.stack_outputs(workspace, stack, require_nodes=False)
    except sources.WatchError as exc:
        raise StackUnreadable(str(exc)) from None
    except OSError as exc:  # no pulumi on PATH, or no such workspace
        raise StackUnreadable(f"cannot run pulumi in {workspace} ({exc}); . scripts/env.sh first") from None
    return outputs, read_config(workspace, stack)


def read_config(workspace: Path, stack: str) -> dict[str, Any]:
    """The stack's raw config alone (one `pulumi config --json`), for readers that need no outputs (the
    ledger, the report, the audit log, the loop's interval), or StackUnreadable naming what could not be
    read."""
    try:
        return Stack(stack, workspace, timeout=60).config_entries()
    except pulumi.PulumiError as exc:
        raise StackUnreadable(f"cannot read the config of stack '{stack}' in {workspace}: {exc}") from None
    except OSError as exc:  # no pulumi on PATH, or no such workspace
        raise StackUnreadable(f"cannot run pulumi in {workspace} ({exc}); . scripts/env.sh first") from None
