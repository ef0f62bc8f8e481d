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

import shlex
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.outputs import NodeOutput
from providers.delivery.ssh import DeliveryError, SshTarget
from stackview.sources import WatchError, node_target, stack_nodes
from supervisor.model import Observation
from supervisor.pulumistack import (
    CLUSTER_TYPE,
    ENDED_TRIALS_KEY,
    FILES_TYPE,
    PHASE_KEY,
    POD_TYPE,
    RELEASING_TRIALS_KEY,
    REPO,
    PulumiStack,
    RecoveryError,
    ReleaseError,
    failing_as,
    policy_options,
    pulumi_up,
    select_stack,
    stale_lock_holder,
)
from supervisor.pulumistack import run_list as _run_list
from supervisor.recoverer import Recoverer, over_ssh, recover_with, replace_urns, replaced_ids
from train.monitor.notify import Webhook

__all__ = [
    "CLUSTER_TYPE",
    "FILES_TYPE",
    "POD_TYPE",
    "Actuator",
    "PulumiStack",
    "Recoverer",
    "RecoveryError",
    "ReleaseError",
    "failed_hosts_note",
    "policy_options",
    "recover_with",
    "replace_urns",
    "replaced_ids",
    "select_stack",
    "stale_lock_holder",
    "summary_text",
]


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
        with failing_as(ReleaseError, "release"):
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
        with failing_as(ReleaseError, "end trials"):
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
    ) + failed_hosts_note(obs)


def failed_hosts_note(obs: Observation) -> str:
    """'; hosts that failed ...' for the release's and the summary's message: what a RunPod support ticket
    names (RunPod's API names no machine; a node knows its host by its GPUs' UUIDs)."""
    if not obs.failed_hosts:
        return ""
    return f"; hosts that failed this run (for a RunPod support ticket): {'; '.join(obs.failed_hosts)}"
