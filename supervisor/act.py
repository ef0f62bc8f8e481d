"""The supervisor's one place of effects: every Pulumi update, SSH command, webhook message and
recovery record a round makes goes through here; `decide` and `recover.assess` only decide.

Pulumi runs through the project's one CLI runner (common/pulumi.py) on the stack's own workspace and backend
(`PulumiStack`; `pulumi_up`: the policy pack, one retry after a stale lock this machine's killed process
left, Pulumi's own error lines in the failure). Pulumi's stack lock keeps a `scripts/up` and the supervisor
apart. Nothing here deletes outside
Pulumi, and nothing deletes the volume, the bucket or a checkpoint.

    release     `trainstack:run.phase` set to `releasing` (on a protected stack: the compute's `protect` is
                lifted by an update that changes nothing else) and then to `released`, under which the
                program declares no pods and no cluster but keeps the network volume, the bucket and the
                secrets. A supervisor killed anywhere in it leaves a phase that says what to finish, and the
                next round (decide's `releasing` rule) runs the same steps again.
    end_trials  a pool's ended trials added to `trainstack:run.ended_trials` (protected: first to
                `releasing_trials`): their pods alone are released.
    restart     every node's (a pool's trial: its own) `delivery:NodeFiles` replaced: its create SIGTERMs
                the node's start script (which uploads the newest checkpoint and exits) and starts it again;
                training resumes from the newest checkpoint in the bucket.
    replace     `pulumi up --refresh --replace <urn>`: the Instant Cluster (RunPod cannot swap one member), or
                only the faulty loose pods. Both providers replace delete-before-create, so two clusters
                never bill at once; the new nodes' start scripts resume from the bucket's newest checkpoint.
    finish      `pulumi up --refresh` with no replace: what a round killed mid-update left converges; and
                phase `recovering` back to active.

A recovery on a protected stack is first updated with `trainstack:run.phase: recovering`, which lifts
`protect` from the compute alone (components/cluster.py), then replaced, then set back to `active`. Every
attempt is written (store.write_attempt) before the first Pulumi call (outcome `begun`) and rewritten with
its outcome after, so a round killed anywhere leaves a record the next round finishes from and the bound on
retries counts.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common import contract, pulumi
from common.outputs import NodeOutput
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget, UnreachableError
from stackview.sources import WatchError, billed_ids, node_target, stack_nodes
from supervisor.faults import Attempt
from supervisor.model import Observation, Plan
from supervisor.store import stamp, write_attempt
from train.monitor.notify import Webhook

REPO = Path(__file__).resolve().parents[1]
PHASE_KEY = "trainstack:run.phase"
ENDED_TRIALS_KEY = "trainstack:run.ended_trials"
RELEASING_TRIALS_KEY = "trainstack:run.releasing_trials"
AVOID_KEY = "trainstack:recovery.avoid_data_centers"
CLUSTER_TYPE = contract.CLUSTER.type
POD_TYPE = contract.POD.type
FILES_TYPE = contract.NODE_FILES.type

# Runs on a node: $1 workdir, $2 grace (s). SIGTERM to the node's start script (the pid file the delivery
# keeps) takes its own path: stop training, upload the newest checkpoint, exit. Waits for it to end.
_SYNC = r"""dir=$1 grace=$2
pidfile="$dir/.run/${RUNPOD_POD_ID:-$(hostname)}.pid"
if [[ ! -f $pidfile ]]; then echo "no start script recorded"; exit 0; fi
pid=$(cat "$pidfile")
if ! kill -0 "$pid" 2>/dev/null || ! grep -qa start-node "/proc/$pid/cmdline"; then
  echo "start script not running"
  exit 0
fi
kill -TERM "$pid"
for _ in $(seq $((grace * 10))); do
  kill -0 "$pid" 2>/dev/null || { echo "synced and stopped"; exit 0; }
  sleep 0.1
done
echo "start script still running after ${grace}s"
"""


class ReleaseError(RuntimeError):
    """The Pulumi update that releases compute failed; the next round tries again from the phase it left."""


class RecoveryError(RuntimeError):
    """A Pulumi update of a recovery failed; the attempt is recorded `failed` and the next round decides."""


@dataclass(frozen=True)
class PulumiStack:
    """One stack on its own workspace and backend (the one `scripts/up` uses), each verb a `pulumi` command
    through the project's one runner (common/pulumi.py), in this process's environment (the supervisor's
    command line sets Pulumi's). Every failure is a PulumiError naming the command and Pulumi's last line."""

    name: str
    workspace: Path

    def set_config(self, key: str, value: str) -> None:
        """`pulumi config set --path KEY VALUE` (plain text; a path's `[i]` makes a list, `2` an integer)."""
        pulumi.run(
            ["config", "set", "--path", key, "--plaintext", "--", value],
            stack=self.name,
            cwd=self.workspace,
            check=True,
        )

    def config(self) -> dict[str, Any]:
        """The stack's config, secrets dropped (common/pulumi.py's one reader)."""
        return pulumi.config(self.name, self.workspace)

    def resources(self) -> list[Mapping[str, Any]]:
        """The resources of `pulumi stack export`'s deployment."""
        state = pulumi.run_json(["stack", "export"], stack=self.name, cwd=self.workspace)
        deployment = state.get("deployment") if isinstance(state, dict) else None
        found = deployment.get("resources") if isinstance(deployment, dict) else None
        return list(found or [])

    def cancel(self) -> None:
        pulumi.run(["cancel", "--yes"], stack=self.name, cwd=self.workspace, check=True)

    def up(
        self,
        *,
        on_output: Callable[[str], None],
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
        refresh: bool = False,
        replace: Sequence[str] = (),
        policy_packs: Sequence[str] = (),
        policy_pack_configs: Sequence[str] = (),
    ) -> dict[str, int]:
        """`pulumi up --yes --skip-preview` with its output and engine events handed over as they come;
        returns the summary's resource changes (`{"same": 3, "replace": 1}`). PulumiError when it fails, with
        everything Pulumi printed in `output`."""
        changes: dict[str, int] = {}

        def event(raw: dict[str, Any]) -> None:
            summary = raw.get("summaryEvent")
            if isinstance(summary, dict):
                changes.update(summary.get("resourceChanges") or {})
            if on_event is not None:
                on_event(raw)

        args = ["up", "--yes", "--skip-preview", "--color", "never", *(["--refresh"] if refresh else [])]
        args += [flag for urn in replace for flag in ("--replace", urn)]
        args += [flag for path in policy_packs for flag in ("--policy-pack", path)]
        args += [flag for path in policy_pack_configs for flag in ("--policy-pack-config", path)]
        done = pulumi.run(args, stack=self.name, cwd=self.workspace, on_output=on_output, on_event=event)
        if done.returncode != 0:
            raise pulumi.PulumiError(f"`pulumi up` failed ({done.returncode})", output=done.stdout)
        return changes


def select_stack(stack: str, workspace: Path) -> PulumiStack:
    """The stack on its own workspace and backend."""
    return PulumiStack(stack, workspace)


def policy_options(stack: str, pack: Path | None = REPO / "policy") -> dict[str, Any]:
    """`pulumi up`'s policy pack and its per-stack config: every update the supervisor makes is judged."""
    if pack is None:
        return {}
    config = REPO / "policy" / "config" / f"{stack}.json"
    return {"policy_packs": [str(pack)], "policy_pack_configs": [str(config)] if config.is_file() else []}


def pulumi_up(
    stack: Any,
    what: str,
    log: Callable[[str], None],
    fail: type[RuntimeError],
    prefix: str,
    **kwargs: Any,
) -> dict[str, int]:
    """`pulumi up` (kwargs: policy packs, refresh, replace, on_event), its output logged line by line; once
    more after clearing a lock that a killed process of this machine left (a supervisor killed mid-update
    leaves the file backend's lock behind, and no later round could finish). A failure raises `fail` with
    Pulumi's own error lines."""

    def line(text: str) -> None:
        if text.strip():
            log(f"  pulumi: {text.rstrip()}")

    log(f"{prefix}: pulumi up ({what})")
    try:
        try:
            changes = stack.up(on_output=line, **kwargs)
        except pulumi.PulumiError as exc:
            holder = stale_lock_holder(f"{exc}\n{exc.output}")
            if holder is None:
                raise
            log(f"{prefix}: the stack's lock was left by {holder}, which no longer runs: pulumi cancel")
            stack.cancel()
            changes = stack.up(on_output=line, **kwargs)
    except pulumi.PulumiError as exc:
        lines = [text.strip() for text in f"{exc}\n{exc.output}".splitlines() if text.strip()]
        said = [text for text in lines if "error" in text.lower()][-3:] or lines[-3:]
        raise fail(f"pulumi up ({what}) failed: {' | '.join(said)}") from None
    applied: dict[str, int] = dict(changes or {})
    log(f"{prefix}: {what} applied ({applied})")
    return applied


def over_ssh(target: SshTarget, command: str, connect_s: float, step_s: float) -> str:
    """A command on a node in batch mode: connection failures retried for `connect_s`, the command itself
    given `step_s`."""
    return Ssh(target, connect_timeout_s=10, deadline_s=connect_s, step_timeout_s=step_s).run(command)


@dataclass
class Actuator:
    """Carries out a decision's actions for one stack; `log` gets one line per step (no secret in any)."""

    stack: str
    workspace: Path
    protect: bool
    policy_pack: Path | None = REPO / "policy"
    webhook_url: str | None = None
    log: Callable[[str], None] = print
    sync_grace_s: float = 60.0
    ssh_run: Callable[[SshTarget, str], str] | None = None
    sent: list[str] = field(default_factory=list)  # messages this actuator delivered (tests read them)

    def notify(self, text: str) -> str:
        line = f"[trainstack {self.stack}] {text}"
        if not self.webhook_url:
            self.log(f"no webhook (ALERT_WEBHOOK_URL): {line}")
            return "notify: no webhook configured, logged only"
        ok = Webhook(self.webhook_url, log=self.log).send(line)
        if ok:
            self.sent.append(line)
        return "notify: delivered" if ok else "notify: webhook failed"

    def sync(self, outputs: Mapping[str, Any]) -> str:
        """A last checkpoint sync on each node that answers; one that does not is reported, not waited for."""
        workdir = str(outputs.get("workdir") or "/workspace/trainstack")
        try:
            nodes = stack_nodes(self.stack, outputs)
        except WatchError as exc:  # a release goes on without its sync: the line says why
            self.log(line := f"sync: none ({exc})")
            return line
        # All nodes at once: each waits up to sync_grace_s for its script, prod's 8 in one grace.
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            results = list(pool.map(lambda n: self._sync_node(n, workdir), nodes))
        line = "sync: " + ("; ".join(results) or "no nodes")
        self.log(line)
        return line

    def _sync_node(self, node: NodeOutput, workdir: str) -> str:
        target = node_target(self.stack, node)
        script = f"bash -c {shlex.quote(_SYNC)} sync {shlex.quote(workdir)} {int(self.sync_grace_s)}"
        try:
            answer = self._run(target, script).strip()
        except DeliveryError as exc:
            answer = f"unreachable ({type(exc).__name__})"
        return f"node {node.rank}: {answer.splitlines()[-1] if answer else 'done'}"

    def _run(self, target: SshTarget, command: str) -> str:
        if self.ssh_run is not None:
            return self.ssh_run(target, command)
        # Connection failures are retried for 15 s only (a node that does not answer is not waited for);
        # one answering node's command may take the whole grace.
        return over_ssh(target, command, 15, self.sync_grace_s + 30)

    def release(self) -> str:
        """Phase `releasing` (protected stacks), then `released`, each applied by a Pulumi update."""
        with _failing_as(ReleaseError, "release"):
            return self._release()

    def _release(self) -> str:
        stack = select_stack(self.stack, self.workspace)
        phases: Sequence[str] = ("releasing", "released") if self.protect else ("released",)
        for phase in phases:
            stack.set_config(PHASE_KEY, phase)
            # `releasing` changes nothing at RunPod (only protect in the state): the policy pack judges the
            # `released` plan, so a run over its cap is never kept up by the cost policies themselves.
            policy = self._policy() if phase == "released" else {}
            pulumi_up(stack, f"{PHASE_KEY}={phase}", self.log, ReleaseError, "release", **policy)
        return "release: compute released (phase released)"

    def end_trials(self, trials: Sequence[int]) -> str:
        """A pool's ended trials: their pod indices added to `trainstack:run.ended_trials` (on a protected
        stack, first to `releasing_trials`, which lifts their protection alone), each step a Pulumi update
        with the policy pack. Idempotent: the list only grows; a trial already there is not added again."""
        with _failing_as(ReleaseError, "end trials"):
            return self._end_trials(trials)

    def _end_trials(self, trials: Sequence[int]) -> str:
        stack = select_stack(self.stack, self.workspace)
        steps = (RELEASING_TRIALS_KEY, ENDED_TRIALS_KEY) if self.protect else (ENDED_TRIALS_KEY,)
        for key in steps:
            wanted = sorted(set(_run_list(stack, key)) | set(trials))
            for i, trial in enumerate(wanted):
                stack.set_config(f"{key}[{i}]", str(int(trial)))
            pulumi_up(stack, f"{key}={wanted}", self.log, ReleaseError, "end trials", **self._policy())
        return f"end trials: the pod(s) of trial(s) {', '.join(map(str, sorted(trials)))} released"

    def _policy(self) -> dict[str, Any]:
        return policy_options(self.stack, self.policy_pack)


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
        )
        self._record(attempt)  # before any Pulumi call: a kill from here on leaves `begun`
        stack = self._stack()
        try:
            with _failing_as(RecoveryError, "recover"):
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


def _run_list(stack: Any, key: str) -> list[int]:
    """The pod indices the stack's config holds under `key` (a `trainstack:run` list; none: empty)."""
    section, _, name = key.partition(".")
    run = stack.config().get(section)
    if isinstance(run, str):  # a value Pulumi kept as text, not as an object
        try:
            run = json.loads(run)
        except ValueError:
            return []
    found = run.get(name) if isinstance(run, dict) else None
    if not isinstance(found, list):
        return []
    return [int(i) for i in found if isinstance(i, int) and not isinstance(i, bool)]


def deleted_compute(event: Mapping[str, Any]) -> bool:
    """Whether an engine event (`pulumi up --event-log`) reports a cluster or pod deleted: its outputs
    event with op `delete` or `delete-replaced`. Pure."""
    done = event.get("resOutputsEvent")
    meta = done.get("metadata") if isinstance(done, Mapping) else None
    if not isinstance(meta, Mapping) or meta.get("type") not in (CLUSTER_TYPE, POD_TYPE):
        return False
    return meta.get("op") in ("delete", "delete-replaced")


@contextmanager
def _failing_as(fail: type[RuntimeError], prefix: str) -> Iterator[None]:
    """A Pulumi command that failed outside `pulumi up` (config set, stack export, cancel) raised as `fail`,
    its message naming the command and Pulumi's last line: the round records it and the next one retries."""
    try:
        yield
    except pulumi.PulumiError as exc:
        raise fail(f"{prefix}: {exc}") from None


_LOCK_RE = re.compile(
    r"currently locked.*?created by (?P<user>[^@\s]+)@(?P<host>\S+) \(pid (?P<pid>\d+)\)", re.S
)


def stale_lock_holder(message: str, host: str | None = None) -> str | None:
    """`user@host (pid N)` when Pulumi's error says the stack is locked by a process of this machine that
    no longer runs (its pid gone, or reused by something other than pulumi); None otherwise: a lock held
    elsewhere, or by a live `pulumi`, is never cleared here (scripts/recover does it by hand)."""
    m = _LOCK_RE.search(message)
    if m is None or m.group("host") != (host or socket.gethostname()):
        return None
    pid = int(m.group("pid"))
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b""
    if b"pulumi" in cmdline:
        return None
    return f"{m.group('user')}@{m.group('host')} (pid {pid})"


def summary_text(obs: Observation, max_run_hours: float, why: str) -> str:
    """The run's summary at the release: steps, final loss, wall time, spent vs forecast, $ saved."""
    runs = obs.runs
    steps = ", ".join(str(r.last_step) for r in runs if r.last_step is not None) or (
        f"{obs.step:g}" if obs.step is not None else "unknown"
    )
    losses = [r.final_loss for r in runs if r.final_loss is not None]
    started = [r.started_at for r in runs if r.started_at]
    wall_h = (obs.at - min(started)) / 3600 if started else None
    spent = "unknown" if obs.spent_usd is None else f"${obs.spent_usd:,.2f}"
    forecast = "no forecast" if obs.forecast_usd is None else f"forecast ${obs.forecast_usd:,.2f}"
    left_h = max(0.0, max_run_hours - (wall_h or 0.0))
    return (
        f"run ended ({why}); compute released. steps: {steps}; final loss: "
        f"{', '.join(f'{x:.4g}' for x in losses) or 'unknown'}; wall time: "
        f"{'unknown' if wall_h is None else f'{wall_h:.2f} h'}; spent {spent} ({forecast}); saved about "
        f"${obs.usd_per_hour * left_h:,.2f} (${obs.usd_per_hour:,.2f}/h no longer billed, "
        f"{left_h:.1f} h left of max_run_hours)"
    )
