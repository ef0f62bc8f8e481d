"""Carrying a recovery plan out, through Pulumi only (issue #29): the Automation API on the stack's own
workspace and backend, the same as the release (supervisor/act.py).

    restart  every node's `delivery:NodeFiles` replaced: its create SIGTERMs the node's start script (which
             uploads the newest checkpoint and exits) and starts it again; training resumes from the newest
             checkpoint in the bucket. Delete of a NodeFiles does nothing, so no node is touched twice.
    replace  `pulumi up --refresh --replace <urn>`: the Instant Cluster (RunPod cannot swap one member), or
             only the faulty loose pods. Both providers replace delete-before-create, so two clusters never
             bill at once; the new nodes' start scripts resume from the bucket's newest checkpoint.
    finish   `pulumi up --refresh` with no replace: what a round killed mid-update left (a cluster deleted
             but not yet created again, pending operations) converges; and phase `recovering` back to active.

A protected stack (trainstack:protect) is first updated with `trainstack:run.phase: recovering`, which lifts
`protect` from the compute alone (components/cluster.py), then replaced, then set back to `active`. Every
attempt is written to the bucket before the first Pulumi call (`supervisor/<stack>/recoveries/<time>.json`,
outcome `begun`) and rewritten with its outcome after, so a round killed anywhere leaves a record the next
round finishes from and the bound on retries counts. Nothing here deletes an object, the bucket or the volume.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from supervisor.faults import Attempt
from supervisor.model import Plan

PHASE_KEY = "trainstack:run.phase"
AVOID_KEY = "trainstack:recovery.avoid_data_centers"
CLUSTER_TYPE = "pulumi-python:dynamic/runpod:InstantCluster"
POD_TYPE = "pulumi-python:dynamic/runpod:Pod"
FILES_TYPE = "pulumi-python:dynamic/delivery:NodeFiles"


class RecoveryError(RuntimeError):
    """A Pulumi update of a recovery failed; the attempt is recorded `failed` and the next round decides."""


def recoveries_prefix(stack: str) -> str:
    return f"supervisor/{stack}/recoveries/"


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y%m%dT%H%M%S.%fZ")


def write_attempt(s3: Any, bucket: str, stack: str, attempt: Attempt) -> str:
    """Put (or overwrite: the key is the attempt's start) one attempt record."""
    key = f"{recoveries_prefix(stack)}{_stamp(attempt.at)}.json"
    body = json.dumps(attempt.__dict__, sort_keys=True, default=list).encode()
    s3.put_object(Bucket=bucket, Key=key, Body=body, ContentType="application/json")
    return key


def read_attempts(s3: Any, bucket: str, stack: str, since: float) -> list[Attempt]:
    """The attempts begun since `since` (a run's bound: its max_run_hours), oldest first."""
    prefix = recoveries_prefix(stack)
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, StartAfter=prefix + _stamp(since)
    )
    for page in pages:
        for obj in page.get("Contents", []):
            try:
                out.append(
                    Attempt.from_json(json.loads(s3.get_object(Bucket=bucket, Key=obj["Key"])["Body"].read()))
                )
            except (ValueError, KeyError, TypeError):
                continue  # another version's record: advice, not a contract
    return sorted(out, key=lambda a: a.at)


def replace_urns(
    resources: Sequence[Mapping[str, Any]], plan: Plan, topology: str, replaced: Sequence[str] = ()
) -> list[str]:
    """The URNs a plan replaces, from the stack's exported state: the cluster, the pods whose pod_id it names,
    or (restart) every node's NodeFiles. Pure; an empty list means there is nothing left to replace.
    `replaced` (replaced_ids: "cluster:<id>") names the cluster the plan was made for: a stack whose cluster
    is another one has been replaced already, and the same plan again replaces nothing."""

    def of(kind: str) -> list[Mapping[str, Any]]:
        return [r for r in resources if r.get("type") == kind and not r.get("delete")]

    if plan.act == "restart":
        files = of(FILES_TYPE)
        if topology == "pods" and plan.targets:  # a pool's trial: its own pod's files only (issue #42)
            wanted = set(plan.targets)
            files = [
                r for r in files if str((r.get("inputs") or r.get("outputs") or {}).get("pod_id")) in wanted
            ]
        return [str(r["urn"]) for r in files]
    if plan.act != "replace":
        return []
    if topology == "cluster":
        meant = {r.split(":", 1)[1] for r in replaced if r.startswith("cluster:")}
        return [
            str(r["urn"])
            for r in of(CLUSTER_TYPE)
            if not meant or str((r.get("outputs") or {}).get("cluster_id") or r.get("id")) in meant
        ]
    wanted = set(plan.targets)
    return [str(r["urn"]) for r in of(POD_TYPE) if str((r.get("outputs") or {}).get("pod_id")) in wanted]


# Runs on a node: $1 workdir, $2 bucket, $3 stamp. The SSH session lacks the start script's environment, so
# the tool reads what it needs from the start script's own (the pid file the delivery keeps).
_DIAGNOSE = r"""dir=$1 bucket=$2 stamp=$3
pidfile="$dir/.run/${RUNPOD_POD_ID:-$(hostname)}.pid"
python=$(tr '\0' '\n' <"/proc/$(cat "$pidfile" 2>/dev/null || echo self)/environ" 2>/dev/null |
  sed -n 's/^TRAINSTACK_PYTHON=//p')
cd "$dir" && PYTHONPATH="$dir" exec "${python:-python3}" -m train.node.diagnostics collect \
  --bucket "$bucket" --stamp "$stamp" --env-of "$pidfile"
"""


def _ssh(target: Any, command: str) -> str:
    from providers.delivery.ssh import Ssh

    return Ssh(target, connect_timeout_s=10, deadline_s=120, step_timeout_s=120).run(command)


@dataclass
class Recoverer:
    """One recovery for one stack; `select` opens the Automation API stack (tests pass a recording fake)."""

    stack: str
    workspace: Path
    protect: bool
    topology: str
    s3: Any
    bucket: str | None
    log: Callable[[str], None] = print
    select: Callable[[str, Path], Any] | None = None
    up_options: Mapping[str, Any] | None = None  # policy pack arguments (supervisor/act.py's)
    ssh_run: Callable[[Any, str], str] | None = None  # tests pass a fake; else ssh in batch mode
    clock: Callable[[], float] = time.time  # the round's clock (the storm's: the emulator's)
    released_at: float | None = None  # when this update's engine reported the replaced compute deleted
    memory: tuple[Any, str] | None = None  # where attempts are recorded (default: the bucket)

    def _stack(self) -> Any:
        if self.select is not None:
            return self.select(self.stack, self.workspace)
        from pulumi import automation as auto

        return auto.select_stack(stack_name=self.stack, work_dir=str(self.workspace))

    def _record(self, attempt: Attempt) -> None:
        client, bucket = self.memory or (self.s3, self.bucket)
        if bucket and client is not None:
            write_attempt(client, bucket, self.stack, attempt)

    def _up(self, stack: Any, what: str, **kwargs: Any) -> None:
        from pulumi import automation as auto

        self.log(f"recover: pulumi up ({what})")
        try:
            result = stack.up(
                color="never", on_output=self._line, on_event=self._event, **kwargs, **(self.up_options or {})
            )
        except auto.errors.CommandError as exc:
            lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
            said = [line for line in lines if "error" in line.lower()][-3:] or lines[-3:]
            raise RecoveryError(f"pulumi up ({what}) failed: {' | '.join(said)}") from None
        self.log(f"recover: {what} applied ({dict(result.summary.resource_changes or {})})")

    def _event(self, event: Any) -> None:
        """Note when the engine reports the old cluster or pod deleted: RunPod stops billing it there."""
        done = getattr(event, "res_outputs_event", None)
        meta = getattr(done, "metadata", None)
        if meta is None or meta.type not in (CLUSTER_TYPE, POD_TYPE):
            return
        if str(getattr(meta.op, "value", meta.op)) in ("delete", "delete-replaced"):
            self.released_at = self.clock()

    def _line(self, line: str) -> None:
        if line.strip():
            self.log(f"  pulumi: {line.rstrip()}")

    def _phase(self, stack: Any, phase: str) -> None:
        from pulumi import automation as auto

        stack.set_config(PHASE_KEY, auto.ConfigValue(phase), path=True)
        self._up(stack, f"{PHASE_KEY}={phase}")

    def diagnose(self, outputs: Mapping[str, Any], now: float) -> str:
        """py-spy of every rank and the NCCL flight recorder on each node that answers, to the bucket
        (train/node/diagnostics.py); a node that does not answer is named, not waited for."""
        import shlex

        from components.delivery import known_hosts_file
        from providers.delivery.ssh import DeliveryError, SshTarget, UnreachableError

        workdir = str(outputs.get("workdir") or "/workspace/trainstack")
        stamp = _stamp(now)
        results = []
        for node in outputs.get("nodes") or []:
            host, _, port = str(node.get("ssh_endpoint") or "").rpartition(":")
            if not host or not port.isdigit() or not self.bucket:
                results.append(f"node {node.get('rank')}: no SSH endpoint or bucket")
                continue
            target = SshTarget(
                host, int(port), "root", str(node["pod_id"]), Path(known_hosts_file(self.stack))
            )
            args = f"{shlex.quote(workdir)} {shlex.quote(self.bucket)} {stamp}"
            script = f"bash -c {shlex.quote(_DIAGNOSE)} diag {args}"
            try:
                answer = (self.ssh_run or _ssh)(target, script).strip()
            except UnreachableError:
                answer = "unreachable over SSH"
            except DeliveryError as exc:  # it answered, the tool failed: its last line says why
                answer = f"diagnostics failed: {str(exc).strip().splitlines()[-1][-200:]}"
            results.append(f"node {node.get('rank')}: {answer.splitlines()[-1] if answer else 'done'}")
        line = "diagnostics: " + ("; ".join(results) or "no nodes")
        self.log(line)
        return line

    def _avoid(self, stack: Any, avoided: Sequence[str]) -> None:
        """The data centers that failed twice go last in the new pods' candidates (components/cluster.py reads
        trainstack:recovery.avoid_data_centers; placed pods are not replaced for the order)."""
        from pulumi import automation as auto

        for i, dc in enumerate(avoided):
            stack.set_config(f"{AVOID_KEY}[{i}]", auto.ConfigValue(dc), path=True)
        self.log(f"recover: {AVOID_KEY} = {list(avoided)} (tried last)")

    def carry_out(
        self, plan: Plan, now: float, pending: Attempt | None = None, replaced: Sequence[str] = ()
    ) -> str:
        """Do the plan; returns what was done in one line (the audit line and the message say it).
        `replaced`: the billed RunPod ids the plan removes (`replaced_ids`), kept in the attempt's record."""
        if plan.act not in ("restart", "replace", "finish"):
            return f"recover: nothing to do ({plan.act})"
        attempt = pending or Attempt(
            now,
            plan.kind,
            plan.targets,
            plan.data_center,
            "begun",
            plan.reason,
            cause=plan.cause,
            replaced=tuple(replaced),
            answered=plan.answered,
        )
        self._record(attempt)  # before any Pulumi call: a kill from here on leaves `begun`
        stack = self._stack()
        try:
            done = self._apply(stack, plan, replaced)
        except Exception:
            self._record(replace(attempt, outcome="failed"))
            raise
        self._record(replace(attempt, outcome="done", released_at=self.released_at or attempt.released_at))
        return done

    def _apply(self, stack: Any, plan: Plan, replaced: Sequence[str]) -> str:
        if plan.act == "finish":
            self._up(stack, "refresh, finishing the last recovery", refresh=True)
            if self.protect:
                self._phase(stack, "active")
            return "recover: converged (pulumi up --refresh); phase active"
        resources = stack.export_stack().deployment.get("resources") or []
        urns = replace_urns(resources, plan, self.topology, replaced)
        if not urns:  # replaced already (a plan made from outputs read before): converge, replace nothing
            self._up(stack, "refresh: nothing left to replace", refresh=True)
            return "recover: nothing left to replace; refreshed"
        if plan.avoided and self.topology == "pods":
            self._avoid(stack, plan.avoided)
        if self.protect:
            self._phase(stack, "recovering")
        what = "restarting the job on every node" if plan.act == "restart" else f"replacing {len(urns)}"
        self._up(stack, what, refresh=plan.act == "replace", replace=urns)
        if self.protect:
            self._phase(stack, "active")
        names = ", ".join(u.rsplit("::", 1)[-1] for u in urns)
        return f"recover: {plan.act} done through Pulumi ({names})"


def replaced_ids(outputs: Mapping[str, Any], plan: Plan, topology: str) -> tuple[str, ...]:
    """The billed RunPod ids a plan removes: the Instant Cluster ("cluster:<id>", from the stack's outputs)
    or the loose pods it replaces ("pod:<id>"). A restart removes nothing. Pure."""
    if plan.act != "replace":
        return ()
    if topology == "cluster":
        return (f"cluster:{outputs['cluster_id']}",) if outputs.get("cluster_id") else ()
    return tuple(f"pod:{t}" for t in plan.targets)


def recover_with(
    round_: Any,
    config: Any,
    outputs: Mapping[str, Any],
    obs: Any,
    plan: Plan,
    s3: Any,
    bucket: str | None,
    actor: Any,
    memory: tuple[Any, str] | None = None,
) -> str:
    """The `recover` action of a round (supervisor/cli.py): diagnostics first when stalled, then the plan."""
    rec = round_.recoverer or Recoverer(
        round_.stack,
        round_.workspace,
        protect=config.protect,
        topology=config.cluster.topology,
        s3=s3,
        bucket=bucket,
        log=round_.log,
        up_options=actor._policy(),
        clock=round_.clock,
        memory=memory,
    )
    fleet = obs.fleet
    pending = None
    if plan.act == "finish" and fleet is not None:
        pending = next((a for a in reversed(fleet.attempts) if a.outcome == "begun"), None)
    lines = []
    if plan.kind == "stalled" and plan.act == "restart":
        lines.append(rec.diagnose(outputs, obs.at))
    replaced = replaced_ids(outputs, plan, config.cluster.topology)
    lines.append(rec.carry_out(plan, obs.at, pending, replaced))
    return "; ".join(lines)
