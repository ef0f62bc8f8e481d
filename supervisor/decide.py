"""The supervisor's decision: a pure function of this round's observation, the rounds before, the policy.

Level-triggered (docs/SUPERVISOR.md): every round decides from the whole picture, so a round that was killed,
skipped or run on another machine changes nothing. The rules run in order and the first that has something
to say decides. Every state a run can be in (supervisor/lifecycle.py) has one of them as its owner:

    releasing        the phase says released but compute is still there: finish that release
    finished         every job's run state says finished and verifies against the bucket: release
    over_budget      the next round would reach the cap: sync and release; past warn_at of it, one warning.
                     With billing unreadable the spend is bounded by the compute's age at the stack's price
    failed_to_start  a start script failed before training (its exit record says where and why): one message
                     with the log's last lines, release (a failed health gate is recovery's: a new node helps)
    never_started    no training step `boot_timeout_min` after the compute came up: release
    recovery         (supervisor/recover.py, docs/RECOVERY.md) a failed job, a lost, unhealthy or preempted
                     node, a stall: restart or replace through Pulumi, bounded; or gave up: release
    unverified       a run state says finished but does not verify (forged or torn): one alert, no release
    job_ended        every job has ended (failed, or finished with others failed) and nothing recovers it:
                     sync and release. A pool with a job still running is that job's; a cluster whose
                     ended nodes all finished while another runs is finishing (its run state comes next)
    slurm_queue_empty  a `scheduler: slurm` stack whose Slurm queue holds no job running or pending
                     (every job it keeps has ended): idle's warning and grace, from the first empty reading
    idle             GPUs idle with no new step, or a stale aggregator, for idle_for_min: one warning, then
                     after idle_grace_min a last sync and release. Never on a Slurm stack whose queue holds a
                     job pending or in a state trainstack does not know (Slurm's wait)
    unreachable      no SSH to the nodes (no key, or the network) while RunPod or billing answer: one alert;
                     never a replace (lost is RunPod's word); billing, RunPod and the bucket still decide
    blind            neither node 0 nor billing answer for blind_for_min: one alert, never an action

Durations come from one clock, the supervisor's rounds: a node's timestamps are compared only with the
same node's (for equality), never with this clock; audit lines dated after this round are not evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from time import gmtime, strftime

from stackconfig.supervisor import RecoveryConfig, SupervisorConfig
from supervisor.model import Decision, ExitFacts, Kind, Observation, RoundRecord, newest_first

# Where a start script can fail before its job trains (train/node/exitrecord.py's phases).
BEFORE_TRAINING = frozenset({"identity", "secrets", "health_gate", "disk", "preflight", "resume"})


@dataclass(frozen=True)
class Policy:
    """The thresholds, in the config's units, and the run's cost cap (USD, 0: none)."""

    interval_min: float = 5.0
    idle_util_pct: float = 10.0
    idle_for_min: float = 30.0
    idle_grace_min: float = 15.0
    warn_at: float = 0.8
    blind_for_min: float = 15.0
    cap_usd: float = 0.0
    boot_timeout_min: float = 30.0  # no step this long after the compute came up: never started
    # off unless given; scripts/supervise passes the stack's trainstack:recovery
    recovery: RecoveryConfig = field(default_factory=lambda: RecoveryConfig(enabled=False))

    @classmethod
    def of(
        cls,
        config: SupervisorConfig,
        cap_usd: float,
        recovery: RecoveryConfig | None = None,
        burn_in_min: float = 0.0,
    ) -> Policy:
        return cls(
            interval_min=config.interval_min,
            idle_util_pct=config.idle_util_pct,
            idle_for_min=config.idle_for_min,
            idle_grace_min=config.idle_grace_min,
            warn_at=config.warn_at,
            blind_for_min=config.blind_for_min,
            cap_usd=cap_usd,
            boot_timeout_min=config.boot_timeout_min + burn_in_min,  # the burn-in is part of the boot
            recovery=recovery or RecoveryConfig(enabled=False),
        )


Rule = Callable[[Observation, Sequence[RoundRecord], Policy], Decision | None]


def _min(seconds: float) -> str:
    return f"{seconds / 60:.0f} min"


def earlier(obs: Observation, history: Sequence[RoundRecord]) -> list[Observation]:
    """The rounds before this one, newest first, one per time: an audit line dated at or after this round
    (a supervisor whose clock ran ahead, a repeated line) is no evidence about the past."""
    seen: set[float] = set()
    out = []
    for record in newest_first(history):
        o = record.observation
        if o.at >= obs.at or o.at in seen:
            continue
        seen.add(o.at)
        out.append(o)
    return out


def _notified(history: Sequence[RoundRecord], kind: Kind, since: float, before: float) -> float | None:
    """When a message of this kind was last sent in [since, before) (None: not in that time)."""
    for record in newest_first(history):
        at = record.observation.at
        if at >= before:
            continue
        if at < since:
            break
        if record.decision.kind == kind and "notify" in record.done:
            return at
    return None


def once(obs: Observation, key: str, decision: Decision, history: Sequence[RoundRecord] = ()) -> Decision:
    """A message sent once per run: without its notify (and with its reason) when `key` was sent already
    (the run's notices, kept beside the audit lines; or an audit line of the window that sent it)."""
    sent = any(r.decision.once == key and "notify" in r.done for r in history)
    if key in obs.notices or sent:
        return replace(decision, actions=tuple(a for a in decision.actions if a != "notify"), message="")
    return replace(decision, once=key)


def pct(ratio: float) -> Decimal:
    """A ratio as an exact percentage (0.29 -> 29), so a value at the threshold is not under it."""
    return (Decimal(repr(ratio)) * 100).normalize()


def releasing(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.phase not in ("active", "recovering") and obs.nodes > 0:  # recovering: supervisor/recover.py
        return Decision(
            "releasing",
            f"trainstack:run.phase is {obs.phase} but {obs.nodes} node(s) remain: finishing that release",
            ("release", "summary"),
            state="releasing",
        )
    return None


# A Slurm stack's queue readings that hold the cluster: a job runs, waits, or is in a state not known.
SLURM_BUSY = frozenset({"queued", "running", "unknown"})


def finished(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    runs = obs.runs
    if obs.nodes == 0 or not runs or not all(r.status == "finished" and r.verified for r in runs):
        return None
    if obs.slurm_queue in SLURM_BUSY:  # the run is done, but Slurm still holds a job for the cluster
        return None
    steps = ", ".join(f"{r.run_id} at step {r.last_step}" for r in runs)
    return Decision(
        "finished",
        f"run finished and its final checkpoint verifies in the bucket ({steps}): releasing compute",
        ("release", "summary"),
        state="finished",
    )


def compute_since(obs: Observation, history: Sequence[RoundRecord], pod: str | None = None) -> float:
    """When this compute came up, on the supervisor's clock: the first round in a row that saw the same pods
    (a replace is new compute; a pool's ended trial leaving is not), and never before the newest recovery
    began (a restart boots again; `pod`: a pool's trial, whose clock only its own recoveries restart)."""
    start = obs.at
    for past in earlier(obs, history):
        if past.nodes == 0 or (obs.pods and past.pods and not set(obs.pods) <= set(past.pods)):
            break
        start = past.at
    attempts = obs.fleet.attempts if obs.fleet else ()
    mine = [a for a in attempts if pod is None or not a.targets or pod in a.targets]
    recovered = max((a.at for a in mine if a.at <= obs.at), default=0.0)
    return max(start, recovered)


def spend(obs: Observation, history: Sequence[RoundRecord]) -> tuple[float | None, str]:
    """What the run has spent and where that figure comes from. Billing when it answers; otherwise an upper
    bound (the cap held only while billing could be read): the last bill read plus the time since
    at the stack's price, or the compute's age at that price (RunPod's creation time of the oldest pod, or
    the first round that saw it), whichever is larger."""
    if obs.spent_usd is not None:
        return obs.spent_usd, "billed"
    rate = obs.usd_per_hour / 3600
    bounds = []
    for past in earlier(obs, history):
        if past.spent_usd is not None:
            bounds.append(past.spent_usd + (obs.at - past.at) * rate)
            break
    starts = [compute_since(obs, history)]
    if obs.created_at is not None:
        starts.append(obs.created_at)
    if obs.nodes > 0:
        bounds.append((obs.at - min(starts)) * rate)
    if obs.spend_bound_usd is not None:  # persisted: the last bill read plus $/h since (supervisor/outage.py)
        bounds.append(obs.spend_bound_usd)
    return (max(bounds), "bounded (billing unreadable)") if bounds else (None, "unknown")


def over_budget(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    cap = policy.cap_usd
    spent, source = spend(obs, history)
    if cap <= 0 or spent is None or obs.nodes == 0:
        return None
    how = "" if source == "billed" else f" ({source}: at most)"
    # Release before the next round would cross the cap: what one more interval at today's price adds.
    next_round = spent + obs.usd_per_hour * policy.interval_min / 60
    if next_round >= cap:
        return Decision(
            "over_budget",
            f"spent ${spent:,.2f}{how} of the ${cap:,.2f} cap and the next {policy.interval_min:g} min "
            "would reach it: syncing the newest checkpoint and releasing compute",
            ("sync", "release", "summary"),
            state="over_budget",
        )
    if spent >= policy.warn_at * cap:
        text = (
            f"spent ${spent:,.2f}{how}, {spent / cap:.0%} of the run's ${cap:,.2f} cap "
            f"(${obs.usd_per_hour:,.2f}/h): compute is released at the cap"
        )
        warning = Decision("over_budget", text, ("notify",), text, state="training")
        warned = once(obs, f"over_budget:{policy.warn_at:g}", warning, history)
        return warned if warned.actions else None  # warned once this run: the release comes at the cap
    return None


def _tail(exits: Sequence[ExitFacts], lines: int = 8) -> str:
    shown = [f"node {e.rank} ({e.pod_id}): {e.reason} [exit {e.exit_status} in {e.phase}]" for e in exits]
    last = exits[0].log_tail[-lines:] if exits and exits[0].log_tail else ()
    return "; ".join(shown) + (
        "\nlast lines of node {}'s log:\n{}".format(exits[0].rank, "\n".join(last)) if last else ""
    )


def jobs_left(obs: Observation, ended: set[str]) -> list[str]:
    """A pool's pods whose job has not ended (a cluster is one job: all its pods or none)."""
    if obs.topology != "pods":
        return [] if ended else list(obs.pods)
    return [p for p in obs.pods if p not in ended]


def ended_pods(obs: Observation) -> set[str]:
    """The pods whose job has ended: an exit record, or (a pool) its run state says finished or failed."""
    ended = {e.pod_id for e in obs.ended}
    if obs.topology == "pods":
        by_run = dict(zip(obs.job_ids, obs.pods, strict=False))
        ended |= {
            by_run[r.run_id] for r in obs.runs if r.status in ("finished", "failed") and r.run_id in by_run
        }
    return ended


def trial_ranks(obs: Observation, pods: Sequence[str]) -> tuple[int, ...]:
    """The pool indices (trainstack:run.ended_trials' unit) of these pods."""
    rank = dict(zip(obs.pods, obs.ranks or range(len(obs.pods)), strict=False))
    return tuple(sorted(rank[p] for p in set(pods) if p in rank))


def end_trials(
    obs: Observation, kind: Kind, pods: Sequence[str], why: str, history: Sequence[RoundRecord]
) -> Decision:
    """A pool's trials that ended while others still run: their pods alone are released (stopped or
    deleted through Pulumi: trainstack:run.ended_trials); the other trials' pods and files stay as they
    are. The message goes once per trial; the update is repeated until the pods are gone (idempotent)."""
    ending = set(pods)
    left = [p for p in obs.pods if p not in ending]
    trials = trial_ranks(obs, pods)
    text = (
        f"{why}\nreleasing the pod(s) of trial(s) {', '.join(map(str, trials))} alone; "
        f"the pod(s) {', '.join(left)} stay"
    )
    head = f"{why.splitlines()[0]}: releasing its pod alone ({len(left)} other pod(s) stay)"
    decision = Decision(kind, head, ("notify", "end_trials"), text, state="trial_ended", trials=trials)
    return once(obs, f"{kind}:" + ".".join(sorted(set(pods))), decision, history)


def trial_ended(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    """A pool's trial finished (its run state verifies) or failed, and no recovery took it up, while other
    trials still run: its pod alone is released. When every trial has ended, `finished` or `job_ended`
    release the pool; a finished trial whose checkpoint does not verify keeps its pod (`unverified`)."""
    if obs.topology != "pods" or obs.nodes == 0 or obs.phase not in ("active", "recovering"):
        return None
    ended = ended_pods(obs)
    by_run = dict(zip(obs.job_ids, obs.pods, strict=False))
    kept = {by_run.get(r.run_id) for r in obs.runs if r.status == "finished" and not r.verified}
    done = [p for p in obs.pods if p in ended and p not in kept]
    if not done or len(done) == len(obs.pods):  # every trial ended: `finished` or `job_ended` release all
        return None
    states = {by_run.get(r.run_id): r for r in obs.runs}
    exits = {e.pod_id: e for e in obs.ended}

    def what(pod: str) -> str:
        run, ex = states.get(pod), exits.get(pod)
        if run is not None and run.status == "finished":
            return f"trial on {pod} finished at step {run.last_step}, its checkpoint verifies"
        if run is not None and run.status == "failed":
            return f"trial on {pod} failed (exit {run.exit_status})"
        return f"trial on {pod}: start script {ex.status} in {ex.phase}: {ex.reason}" if ex else pod

    return end_trials(obs, "trial_ended", done, "; ".join(what(p) for p in done), history)


def _recovery_acts(obs: Observation, policy: Policy) -> bool:
    return policy.recovery.enabled and obs.fleet is not None


def failed_to_start(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if obs.nodes == 0 or obs.phase not in ("active", "recovering"):
        return None
    failed = [e for e in obs.ended if e.status == "failed" and e.phase in BEFORE_TRAINING]
    if _recovery_acts(obs, policy):  # a failed health gate: a new node could help, recovery replaces it
        failed = [e for e in failed if e.phase != "health_gate"]
    if not failed:
        return None
    text = f"failed to start: {_tail(failed)}"
    if jobs_left(obs, ended_pods(obs)):  # a pool whose other trials still run: this trial's pod alone goes
        return end_trials(obs, "failed_to_start", [e.pod_id for e in failed], text, history)
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


def never_started(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if obs.nodes == 0 or obs.phase not in ("active", "recovering"):
        return None
    pods, lasted = _not_started(obs, history)
    if obs.topology == "pods" and pods:  # each trial's own boot: another trial's restart is not its own
        ages = {p: obs.at - compute_since(obs, history, p) for p in pods}
        pods = [p for p in pods if ages[p] >= policy.boot_timeout_min * 60]
        lasted = min((ages[p] for p in pods), default=0.0)
    if not pods or lasted < policy.boot_timeout_min * 60:
        return None  # booting: image pull, health checks, burn-in
    if obs.topology == "pods" and jobs_left(obs, ended_pods(obs) | set(pods)):
        # a pool with a trial still running: the trials that never started release their own pods alone
        why = f"no training step {_min(lasted)} after the compute came up (boot_timeout_min " + (
            f"{policy.boot_timeout_min:g}): trial(s) on {', '.join(pods)} never started"
        )
        return end_trials(obs, "never_started", pods, why, history)
    who = "the job" if obs.topology != "pods" else f"trial(s) on {', '.join(pods)}"
    text = (
        f"no training step {_min(lasted)} after the compute came up (boot_timeout_min "
        f"{policy.boot_timeout_min:g}): {who} never started; releasing compute"
    )
    if obs.exits:
        text += "; " + _tail(obs.exits)
    return Decision("never_started", text.splitlines()[0], ("release",), text, state="booting")


def unverified(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    bad = [r for r in obs.runs if r.status == "finished" and not r.verified]
    if not bad or obs.nodes == 0:
        return None
    reason = f"run state of {bad[0].run_id} says finished but does not verify: {bad[0].why}; not releasing"
    return once(
        obs,
        f"unverified:{bad[0].run_id}",
        Decision("unverified", reason, ("notify",), f"ALERT: {reason}", state="unverified"),
        history,
    )


def _finishing(obs: Observation) -> bool:
    """A cluster whose ended nodes all finished while others have not ended: the job is finishing, not over.
    Its rank 0 writes the run state only once every node has marked its final sync, after which each node
    writes its exit record; so for the seconds between a peer's end and rank 0's write, a round reads an
    ended node and no finished state (CI saw a round there release a finished run as `job_ended`). The
    next round reads it `finished`; a rank 0 that never writes it is no longer stepping: `idle`'s, with its
    deadline, or recovery's if its node is lost."""
    if obs.topology == "pods" or any(e.status != "finished" for e in obs.ended):
        return False
    return bool(obs.pods) and not {e.pod_id for e in obs.ended} >= set(obs.pods)


def job_ended(obs: Observation, _history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    """Every job has ended and nothing before this rule answered it (no recovery, or it gave up its say):
    nothing useful is left to pay for."""
    if obs.nodes == 0 or obs.phase not in ("active", "recovering"):
        return None
    from supervisor.recover import news

    attempts = obs.fleet.attempts if obs.fleet else ()
    failed_runs = [r for r in obs.runs if r.status == "failed" and news(r, attempts)]
    if obs.topology == "pods" and obs.pods:
        if jobs_left(obs, ended_pods(obs)):
            return None
    # A cluster is one job: a failed run state or an exit ends it, unless it is finishing (_finishing).
    elif not failed_runs and (not obs.ended or _finishing(obs)):
        return None
    why = (
        f"training exited with status {failed_runs[0].exit_status} ({failed_runs[0].run_id})"
        if failed_runs
        else "every job's start script has ended"
    )
    return Decision(
        "job_ended",
        f"{why}; no job is left running: syncing and releasing compute",
        ("sync", "release", "summary"),
        state="failed",
    )


def _idle_sign(obs: Observation, policy: Policy) -> str | None:
    """This round's own sign of idling: a step to compare across rounds, and GPUs that are not busy (low, or
    unknown: no NVML on the node). GPUs reading busy are never idle, even at a stalled step (a run this
    supervisor cannot judge)."""
    if obs.nodes == 0 or obs.node0_reachable is not True or obs.slurm_queue in ("queued", "unknown"):
        return None  # a Slurm job waiting (or in a state not known) is Slurm's wait, never idle
    if obs.step is not None and obs.gpu_util_max is None:
        return "GPU utilisation unknown (no GPU metrics)"
    if (
        obs.step is not None
        and obs.gpu_util_max is not None
        and pct(obs.gpu_util_max) < Decimal(repr(policy.idle_util_pct))
    ):
        return f"GPU utilisation at most {obs.gpu_util_max:.0%} (under {policy.idle_util_pct:g}%)"
    return None


def _idle_now(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> tuple[str, float] | None:
    """Why this round looks idle and since when (the supervisor's clock), or None."""
    if obs.nodes == 0 or obs.node0_reachable is not True or obs.slurm_queue in ("queued", "unknown"):
        return None  # a Slurm job waiting (or in a state not known) is Slurm's wait, never idle
    why = _idle_sign(obs, policy)
    if why is not None:
        start = obs.at
        for past in earlier(obs, history):
            if past.step != obs.step or _idle_sign(past, policy) is None:
                break
            start = past.at
        if obs.gpu_util_max is None and start == obs.at:
            # Without GPU metrics the one sign of idling is a step that did not move since an earlier round:
            # a first round (a --dry-run) has none, and a training run is not "idle" for want of NVML.
            return None
        return why, start
    # The aggregator's own round stamp (its node's clock, compared only with itself) has not moved: it
    # stopped. A pool's is the newest of its pods' own aggregators (stackview/sources.py): stopped only when
    # every trial's has.
    if obs.aggregator_round is None:
        return None
    start = obs.at
    for past in earlier(obs, history):
        if past.aggregator_round != obs.aggregator_round:
            break
        start = past.at
    if start == obs.at:
        return None
    return f"node 0 answers but its aggregator's round has not moved for {_min(obs.at - start)}", start


def idle(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    now = _idle_now(obs, history, policy)
    if now is None:
        return None
    why, start = now
    return _idle_release(obs, history, policy, why, start, f"with no new step (step {obs.step})")


def queue_empty_since(obs: Observation, history: Sequence[RoundRecord]) -> float | None:
    """When a Slurm stack's queue was first read empty in the rounds up to this one (None: not empty now).
    A round that did not read it (no SSH) ends the run of rounds: the count starts again."""
    if obs.nodes == 0 or obs.node0_reachable is not True or obs.slurm_queue != "empty":
        return None
    start = obs.at
    for past in earlier(obs, history):
        if past.nodes == 0 or past.slurm_queue != "empty":
            break
        start = past.at
    return start


def slurm_queue_empty(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    """A `scheduler: slurm` stack whose queue holds nothing running or pending (supervisor/slurm.py
    `queue_reading`): Slurm has nothing for the cluster to do. Idle's thresholds, on the queue's own clock."""
    start = queue_empty_since(obs, history)
    busy = obs.gpu_util_max is not None and pct(obs.gpu_util_max) >= Decimal(repr(policy.idle_util_pct))
    if start is None or busy:  # GPUs busy outside Slurm are never called idle (the generic rule's word)
        return None
    since = strftime("%Y-%m-%d %H:%M UTC", gmtime(start))
    why = f"slurm queue empty: no job running or pending since {since}"
    return _idle_release(obs, history, policy, why, start, "with nothing for Slurm to run")


def _idle_release(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy, why: str, start: float, detail: str
) -> Decision:
    """Idle since `start`: nothing before idle_for_min, then one warning, then after idle_grace_min a last
    sync and release (`detail`: what the warning says is missing)."""
    lasted = obs.at - start
    if lasted < policy.idle_for_min * 60:
        return Decision(
            "idle", f"{why} for {_min(lasted)} (acts at {policy.idle_for_min:g} min)", state="idle"
        )
    warned = _notified(history, "idle", since=start, before=obs.at)
    if warned is None:
        text = (
            f"{why} for {_min(lasted)} {detail}: compute is released in "
            f"{policy.idle_grace_min:g} min unless training resumes"
        )
        return Decision("idle", text, ("notify",), text, state="idle")
    if obs.at - warned < policy.idle_grace_min * 60:
        return Decision(
            "idle", f"{why}; warned {_min(obs.at - warned)} ago, release after the grace", state="idle"
        )
    return Decision(
        "idle",
        f"{why} for {_min(lasted)}, {_min(obs.at - warned)} after the warning: syncing and releasing compute",
        ("sync", "release", "summary"),
        state="idle",
    )


def unreachable(obs: Observation, history: Sequence[RoundRecord], _policy: Policy) -> Decision | None:
    if obs.nodes == 0 or obs.blind or (obs.ssh_key and obs.node0_reachable is not False):
        return None
    cause = "the supervisor has no SSH key (TRAINSTACK_SSH_KEY)" if not obs.ssh_key else "no SSH to node 0"
    reason = (
        f"{cause} while RunPod and billing answer: not a lost node, nothing is replaced; deciding from "
        "billing, RunPod and the bucket (finished, the cap, a pod RunPod stops)"
    )
    key = "unreachable:" + ("no_key" if not obs.ssh_key else "ssh")
    alert = Decision("unreachable", reason, ("notify",), f"ALERT: {reason}", state="unreachable")
    return once(obs, key, alert, history)


def blind(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    if not obs.blind:
        return None
    start = obs.at
    for past in earlier(obs, history):
        if not past.blind:
            break
        start = past.at
    lasted = obs.at - start
    reason = f"no SSH to node 0 and no RunPod billing for {_min(lasted)}: not acting blind"
    if (
        lasted < policy.blind_for_min * 60
        or _notified(history, "blind", since=start, before=obs.at) is not None
    ):
        return Decision("blind", reason, state="unreachable")
    return Decision(
        "blind", reason, ("notify",), f"ALERT: {reason}; look at the stack by hand", state="unreachable"
    )


def _recovery(obs: Observation, history: Sequence[RoundRecord], policy: Policy) -> Decision | None:
    from supervisor.recover import recovery  # its own module (it imports this one's Policy)

    return recovery(obs, history, policy)


RULES: tuple[Rule, ...] = (
    releasing,
    finished,
    over_budget,
    failed_to_start,
    never_started,
    _recovery,
    trial_ended,
    unverified,
    job_ended,
    slurm_queue_empty,
    idle,
    unreachable,
    blind,
)


def decide(
    obs: Observation, history: Sequence[RoundRecord], policy: Policy, rules: Sequence[Rule] = RULES
) -> Decision:
    """The first rule with something to say, else `none` with what was seen."""
    for rule in rules:
        decision = rule(obs, history, policy)
        if decision is not None:
            return decision
    if obs.nodes == 0:
        return Decision(
            "none", f"no compute up (phase {obs.phase}): nothing bills but storage", state="no_compute"
        )
    spent = "unknown" if obs.spent_usd is None else f"${obs.spent_usd:,.2f}"
    if obs.slurm_queue in ("queued", "unknown"):
        what = "a job waiting" if obs.slurm_queue == "queued" else "a job in a state trainstack does not know"
        return Decision(
            "none",
            f"slurm queue holds {what}: Slurm's, neither idle nor finished "
            f"(spent {spent}; the cap bounds it)",
            state="queued",
        )
    if obs.step is None:
        since = compute_since(obs, history)
        return Decision(
            "none",
            f"booting: no step yet, {_min(obs.at - since)} of boot_timeout_min {policy.boot_timeout_min:g}",
            state="booting",
        )
    return Decision(
        "none",
        f"training runs: step {obs.step}, spent {spent} at ${obs.usd_per_hour:,.2f}/h",
        state="training",
    )
