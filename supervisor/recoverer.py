"""A recovery carried out (supervisor/recover.py decides it): diagnostics, then the Pulumi update of its
plan (supervisor/pulumistack.py), each attempt recorded before the first Pulumi call and after its outcome.
What each act does: supervisor/act.py's docstring.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from providers.delivery.ssh import DeliveryError, Ssh, SshTarget, UnreachableError
from stackview.sources import WatchError, billed_ids, node_target, stack_nodes
from supervisor.faults import Attempt
from supervisor.model import Plan
from supervisor.pulumistack import (
    AVOID_KEY,
    CLUSTER_TYPE,
    FILES_TYPE,
    PHASE_KEY,
    POD_TYPE,
    RecoveryError,
    deleted_compute,
    failing_as,
    pulumi_up,
    select_stack,
)
from supervisor.store import stamp, write_attempt


def over_ssh(target: SshTarget, command: str, connect_s: float, step_s: float) -> str:
    """A command on a node in batch mode: connection failures retried for `connect_s`, the command itself
    given `step_s`."""
    return Ssh(target, connect_timeout_s=10, deadline_s=connect_s, step_timeout_s=step_s).run(command)


@dataclass
class Recoverer:
    """One recovery for one stack; `select` opens the stack (`PulumiStack`; tests pass a recording fake)."""

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
        return (self.select or select_stack)(self.stack, self.workspace)

    def _record(self, attempt: Attempt) -> None:
        client, bucket = self.memory or (self.s3, self.bucket)
        if bucket and client is not None:
            write_attempt(client, bucket, self.stack, attempt)

    def _up(self, stack: Any, what: str, **kwargs: Any) -> None:
        options = {**kwargs, **(self.up_options or {})}
        pulumi_up(stack, what, self.log, RecoveryError, "recover", on_event=self._event, **options)

    def _event(self, event: Mapping[str, Any]) -> None:
        """Note when the engine reports the old cluster or pod deleted: RunPod stops billing it there."""
        if deleted_compute(event):
            self.released_at = self.clock()

    def _phase(self, stack: Any, phase: str) -> None:
        stack.set_config(PHASE_KEY, phase)
        self._up(stack, f"{PHASE_KEY}={phase}")

    def diagnose(self, outputs: Mapping[str, Any], now: float) -> str:
        """py-spy of every rank and the NCCL flight recorder on each node that answers, to the bucket
        (train/node/diagnostics.py); a node that does not answer is named, not waited for."""
        workdir = str(outputs.get("workdir") or "/workspace/trainstack")
        when = stamp(now)
        results = []
        try:
            nodes = stack_nodes(self.stack, outputs)
        except WatchError as exc:
            self.log(line := f"diagnostics: none ({exc})")
            return line
        for node in nodes:
            target = node_target(self.stack, node)
            if not self.bucket:
                results.append(f"node {node.rank}: no bucket")
                continue
            args = f"{shlex.quote(workdir)} {shlex.quote(self.bucket)} {when}"
            script = f"bash -c {shlex.quote(_DIAGNOSE)} diag {args}"
            try:
                answer = (self.ssh_run or _diagnose_ssh)(target, script).strip()
            except UnreachableError:
                answer = "unreachable over SSH"
            except DeliveryError as exc:  # it answered, the tool failed: its last line says why
                answer = f"diagnostics failed: {str(exc).strip().splitlines()[-1][-200:]}"
            results.append(f"node {node.rank}: {answer.splitlines()[-1] if answer else 'done'}")
        line = "diagnostics: " + ("; ".join(results) or "no nodes")
        self.log(line)
        return line

    def _avoid(self, stack: Any, avoided: Sequence[str]) -> None:
        """The data centers that failed twice go last in the new pods' candidates (components/cluster.py reads
        trainstack:recovery.avoid_data_centers; placed pods are not replaced for the order)."""
        for i, dc in enumerate(avoided):
            stack.set_config(f"{AVOID_KEY}[{i}]", dc)
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
            trials=plan.trials,
        )
        self._record(attempt)  # before any Pulumi call: a kill from here on leaves `begun`
        stack = self._stack()
        try:
            with failing_as(RecoveryError, "recover"):
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
        resources = stack.resources()
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
        cluster_id = billed_ids(outputs).cluster_id
        return (f"cluster:{cluster_id}",) if cluster_id else ()
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
        if topology == "pods" and plan.targets:  # a pool's trial: its own pod's files only
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


def _diagnose_ssh(target: SshTarget, command: str) -> str:
    return over_ssh(target, command, 120, 120)
