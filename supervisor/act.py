"""The one actuator: a message to the team's webhook, a last checkpoint sync over SSH, and the release of the
compute as a Pulumi update through the Automation API on the stack's own workspace and backend.

Release = `trainstack:run.phase` set to `releasing` (on a protected stack: the compute's `protect` is lifted
by an update that changes nothing else) and then to `released`, under which the program declares no pods and
no cluster but keeps the network volume, the bucket and the secrets. Each step is idempotent: a supervisor
killed anywhere in it leaves a phase that says what to finish, and the next round (decide's `releasing`
rule) runs the same steps again. Pulumi's own stack lock keeps a `scripts/up` and the supervisor apart.
Nothing here deletes outside Pulumi, and nothing deletes the volume, the bucket or a checkpoint.
"""

from __future__ import annotations

import json
import re
import shlex
import socket
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.delivery import known_hosts_file
from providers.delivery.ssh import DeliveryError, Ssh, SshTarget
from supervisor.model import Observation
from train.monitor.notify import Webhook

REPO = Path(__file__).resolve().parents[1]
PHASE_KEY = "trainstack:run.phase"
ENDED_TRIALS_KEY = "trainstack:run.ended_trials"
RELEASING_TRIALS_KEY = "trainstack:run.releasing_trials"

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
        nodes = [n for n in outputs.get("nodes") or [] if isinstance(n, Mapping)]
        # All nodes at once: each waits up to sync_grace_s for its script, prod's 8 in one grace.
        with ThreadPoolExecutor(max_workers=max(1, min(16, len(nodes)))) as pool:
            results = list(pool.map(lambda n: self._sync_node(n, workdir), nodes))
        line = "sync: " + ("; ".join(results) or "no nodes")
        self.log(line)
        return line

    def _sync_node(self, node: Mapping[str, Any], workdir: str) -> str:
        host, _, port = str(node.get("ssh_endpoint") or "").rpartition(":")
        if not host or not port.isdigit():
            return f"node {node.get('rank')}: no SSH endpoint"
        target = SshTarget(host, int(port), "root", str(node["pod_id"]), Path(known_hosts_file(self.stack)))
        script = f"bash -c {shlex.quote(_SYNC)} sync {shlex.quote(workdir)} {int(self.sync_grace_s)}"
        try:
            answer = self._run(target, script).strip()
        except DeliveryError as exc:
            answer = f"unreachable ({type(exc).__name__})"
        return f"node {node.get('rank')}: {answer.splitlines()[-1] if answer else 'done'}"

    def _run(self, target: SshTarget, command: str) -> str:
        if self.ssh_run is not None:
            return self.ssh_run(target, command)
        # Connection failures are retried for 15 s only (a node that does not answer is not waited for);
        # one answering node's command may take the whole grace.
        step = self.sync_grace_s + 30
        return Ssh(target, connect_timeout_s=10, deadline_s=15, step_timeout_s=step).run(command)

    def release(self) -> str:
        """Phase `releasing` (protected stacks), then `released`, each applied by a Pulumi update."""
        from pulumi import automation as auto

        stack = auto.select_stack(stack_name=self.stack, work_dir=str(self.workspace))
        phases: Sequence[str] = ("releasing", "released") if self.protect else ("released",)
        for phase in phases:
            stack.set_config(PHASE_KEY, auto.ConfigValue(phase), path=True)
            self.log(f"release: {PHASE_KEY}={phase}, pulumi up")
            # `releasing` changes nothing at RunPod (only protect in the state): the policy pack judges the
            # `released` plan, so a run over its cap is never kept up by the cost policies themselves.
            policy = self._policy() if phase == "released" else {}
            try:
                result = self._up(stack, policy)
            except auto.errors.CommandError as exc:
                last = [line for line in str(exc).splitlines() if line.strip()][-3:]
                raise ReleaseError(f"pulumi up with {PHASE_KEY}={phase} failed: {' | '.join(last)}") from None
            changes = dict(result.summary.resource_changes or {})
            self.log(f"release: phase {phase} applied ({changes})")
        return "release: compute released (phase released)"

    def end_trials(self, trials: Sequence[int]) -> str:
        """A pool's ended trials: their pod indices added to `trainstack:run.ended_trials` (on a protected
        stack, first to `releasing_trials`, which lifts their protection alone), each step a Pulumi update
        with the policy pack. Idempotent: the list only grows; a trial already there is not added again."""
        from pulumi import automation as auto

        stack = auto.select_stack(stack_name=self.stack, work_dir=str(self.workspace))
        steps = (RELEASING_TRIALS_KEY, ENDED_TRIALS_KEY) if self.protect else (ENDED_TRIALS_KEY,)
        for key in steps:
            wanted = sorted(set(_run_list(stack, key)) | set(trials))
            for i, trial in enumerate(wanted):
                stack.set_config(f"{key}[{i}]", auto.ConfigValue(str(int(trial))), path=True)
            self.log(f"end trials: {key}={wanted}, pulumi up")
            try:
                result = self._up(stack, self._policy())
            except auto.errors.CommandError as exc:
                last = [line for line in str(exc).splitlines() if line.strip()][-3:]
                raise ReleaseError(f"pulumi up with {key}={wanted} failed: {' | '.join(last)}") from None
            self.log(f"end trials: {key} applied ({dict(result.summary.resource_changes or {})})")
        return f"end trials: the pod(s) of trial(s) {', '.join(map(str, sorted(trials)))} released"

    def _up(self, stack: Any, policy: dict[str, Any]) -> Any:
        """`pulumi up`; once, after clearing a lock that a killed process of this machine left (a supervisor
        killed mid-release leaves the file backend's lock behind, and no later round could finish)."""
        from pulumi import automation as auto

        try:
            return stack.up(on_output=self._pulumi_line, color="never", **policy)
        except auto.errors.CommandError as exc:
            holder = stale_lock_holder(str(exc))
            if holder is None:
                raise
            self.log(f"release: the stack's lock was left by {holder}, which no longer runs: pulumi cancel")
            stack.cancel()
            return stack.up(on_output=self._pulumi_line, color="never", **policy)

    def _policy(self) -> dict[str, Any]:
        if self.policy_pack is None:
            return {}
        config = REPO / "policy" / "config" / f"{self.stack}.json"
        return {
            "policy_packs": [str(self.policy_pack)],
            "policy_pack_configs": [str(config)] if config.is_file() else [],
        }

    def _pulumi_line(self, line: str) -> None:
        if line.strip():
            self.log(f"  pulumi: {line.rstrip()}")


def _run_list(stack: Any, key: str) -> list[int]:
    """The pod indices the stack's config holds under `key` (a `trainstack:run` list; none: empty)."""
    section, _, name = key.partition(".")
    value = stack.get_all_config().get(section)
    try:
        run = json.loads(value.value) if value is not None else {}
    except ValueError:
        return []
    found = run.get(name) if isinstance(run, dict) else None
    return [int(i) for i in found if isinstance(i, int)] if isinstance(found, list) else []


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
