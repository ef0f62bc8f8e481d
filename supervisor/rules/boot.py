"""A run's boot: a start script that failed before training, and a job that never started.

failed_to_start  a start script failed before training (its exit record says where and why): one message
                 with the log's last lines, release (a failed health gate is recovery's: a new node helps)
never_started    no training step `boot_timeout_min` (+ the training's burn_in_min) after the compute
                 came up: release. A pool: per trial, each on its own clock
"""

from __future__ import annotations

from collections.abc import Sequence

from supervisor.model import Decision, ExitFacts, Observation, RoundRecord
from supervisor.policy import Policy
from supervisor.rules.base import Rule, State, compute_since, earlier, live, minutes, one_round
from supervisor.rules.pool import end_trials, ended_pods, jobs_left

# Where a start script can fail before its job trains (train/node/exitrecord.py's phases).
BEFORE_TRAINING = frozenset({"identity", "secrets", "health_gate", "disk", "preflight", "resume"})


def tail(exits: Sequence[ExitFacts], lines: int = 8) -> str:
    shown = [f"node {e.rank} ({e.pod_id}): {e.reason} [exit {e.exit_status} in {e.phase}]" for e in exits]
    last = exits[0].log_tail[-lines:] if exits and exits[0].log_tail else ()
    return "; ".join(shown) + (
        "\nlast lines of node {}'s log:\n{}".format(exits[0].rank, "\n".join(last)) if last else ""
    )


def failed_to_start(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if not live(obs):
        return None
    failed = [e for e in obs.ended if e.status == "failed" and e.phase in BEFORE_TRAINING]
    if policy.recovery.enabled and obs.fleet is not None:  # a failed health gate: recovery replaces it
        failed = [e for e in failed if e.phase != "health_gate"]
    if not failed:
        return None
    text = f"failed to start: {tail(failed)}"
    if jobs_left(obs, ended_pods(obs)):  # a pool whose other trials still run: this trial's pod alone goes
        pods = [e.pod_id for e in failed]
        late = [p for p in _late(obs, history, policy) if p not in pods]  # past their boot in this round too
        if late and jobs_left(obs, ended_pods(obs) | set(late)):
            timeout = policy.boot_timeout_min
            text += f"; trial(s) on {', '.join(late)} never started (boot_timeout_min {timeout:g})"
            pods += late
        return end_trials(obs, "failed_to_start", pods, text, history)
    return Decision(
        "failed_to_start", text.splitlines()[0] + ": releasing compute", ("release",), text, state="failed"
    )


def _stepped_pods(obs: Observation, history: Sequence[RoundRecord], since: float) -> set[str]:
    """The pods whose job reported a step in any round since the compute came up (a cluster: all or none)."""
    out: set[str] = set()
    for o in [obs, *(p for p in earlier(obs, history) if p.at >= since)]:
        if o.topology == "pods" and o.node_steps:
            out |= {pod for pod, step in zip(o.pods, o.node_steps, strict=False) if step is not None}
        elif o.step is not None:
            out |= set(obs.pods) or {"*"}
    return out


def _not_started(obs: Observation, history: Sequence[RoundRecord]) -> tuple[list[str], float]:
    """The jobs (pods; a cluster: all of them) that never reported a step and wrote no state, and how long
    the compute has been up. Only with node 0 answering: without SSH nothing says whether a job stepped."""
    since = compute_since(obs, history)
    if obs.node0_reachable is not True:
        return [], obs.at - since
    stepped = _stepped_pods(obs, history, since)
    wrote = {r.run_id for r in obs.runs if r.status != "absent"}
    if obs.topology != "pods":
        idle = not stepped and not wrote and not obs.ended
        return (list(obs.pods) or ["*"]) if idle else [], obs.at - since
    by_pod = dict(zip(obs.pods, obs.job_ids, strict=False)) if len(obs.job_ids) == len(obs.pods) else {}
    ended = ended_pods(obs)
    pods = [p for p in obs.pods if p not in stepped and p not in ended and by_pod.get(p) not in wrote]
    return pods, obs.at - since


def _late(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> list[str]:
    """A pool's pods whose own trial never stepped boot_timeout_min after it came up."""
    pods, _ = _not_started(obs, history)
    if obs.topology != "pods":
        return []
    return [p for p in pods if obs.at - compute_since(obs, history, p) >= policy.boot_timeout_min * 60]


def never_started(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if not live(obs):
        return None
    timeout = policy.boot_timeout_min
    pods, lasted = _not_started(obs, history)
    if obs.topology == "pods" and pods:  # each trial's own boot: another trial's restart is not its own
        ages = {p: obs.at - compute_since(obs, history, p) for p in pods}
        pods = [p for p in pods if ages[p] >= timeout * 60]
        lasted = min((ages[p] for p in pods), default=0.0)
    if not pods or lasted < timeout * 60:
        return None  # booting: image pull, health checks, burn-in
    if obs.topology == "pods" and jobs_left(obs, ended_pods(obs) | set(pods)):
        # a pool with a trial still running: the trials that never started release their own pods alone
        why = f"no training step {minutes(lasted)} after the compute came up (boot_timeout_min " + (
            f"{timeout:g}): trial(s) on {', '.join(pods)} never started"
        )
        return end_trials(obs, "never_started", pods, why, history)
    who = "the job" if obs.topology != "pods" else f"trial(s) on {', '.join(pods)}"
    text = (
        f"no training step {minutes(lasted)} after the compute came up (boot_timeout_min "
        f"{timeout:g}): {who} never started; releasing compute"
    )
    if obs.exits:
        text += "; " + tail(obs.exits)
    return Decision("never_started", text.splitlines()[0], ("release",), text, state="booting")


def _boot_deadline(p: Policy) -> float:
    return p.boot_timeout_min + p.interval_min


FAILED_TO_START = Rule(
    "failed_to_start", failed_to_start, ("failed", "trial_ended"), one_round, history=("notices",)
)
NEVER_STARTED = Rule(
    "never_started",
    never_started,
    ("booting", "queued", "trial_ended"),
    _boot_deadline,
    look_back_min=_boot_deadline,
    history=("audit", "attempts", "notices"),
)

STATES = (
    State(
        "booting",
        "release when no step came boot_timeout_min (+ burn_in_min) after the compute came up",
        _boot_deadline,
        "boot_timeout_min + burn_in_min + one round, from the compute's first round",
    ),
    State(
        "failed",
        "one message with the exit record's reason and log tail, release (a failed health gate: replace)",
        one_round,
        "one round after the exit record or failed run state is written",
    ),
)
