"""The supervisor's records: what one round observed, what it decided, and the audit line that keeps both.

Plain frozen dataclasses that round-trip through JSON, so the audit lines in the bucket are the history the
next round (a later CI job, another machine) decides from: the supervisor remembers nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from supervisor.faults import Fleet

Kind = Literal[
    "none",
    "finished",
    "idle",
    "over_budget",
    "blind",
    "unverified",
    "releasing",
    # (supervisor/recover.py)
    "job_failed",
    "preempted",
    "node_lost",
    "node_unhealthy",
    "stalled",
    "recovering",
    "gave_up",
    # the run's lifecycle (supervisor/lifecycle.py) owns every state
    "failed_to_start",
    "never_started",
    "unreachable",
    "job_ended",
    "trial_ended",  # a pool's trial ended while others run: its pod alone is released
]
# notify: one webhook message; sync: a last checkpoint sync on each node that answers; release: the Pulumi
# update that removes the compute; summary: the run's summary message once the release is done.
# end_trials: the Pulumi update that releases the pods of a pool's ended trials (`Decision.trials`) alone.
Action = Literal[
    "notify", "sync", "release", "summary", "recover", "end_trials"
]  # recover: act.py's Recoverer


@dataclass(frozen=True)
class ExitFacts:
    """A node's exit record (train/node/exitrecord.py) as a round read it: its start script ended."""

    rank: int
    pod_id: str
    status: str  # failed | finished | stopped
    phase: str  # where the start script was: identity ... preflight, resume, training, sync, finish
    exit_status: int
    reason: str = ""
    log_tail: tuple[str, ...] = ()
    run_id: str = ""
    at: float | None = None  # the node's clock when it wrote the record: identity only, never compared

    @property
    def key(self) -> str:
        """This record's identity: a recovery that answered it (restarted the job) lists it, and a new start
        script's run is never ended by its predecessor's record."""
        return f"exit:{self.pod_id}:{self.rank}:{self.at}"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ExitFacts:
        return cls(**{**data, "log_tail": tuple(data.get("log_tail") or ())})


@dataclass(frozen=True)
class Plan:
    """What a recovery round does (supervisor/recover.py decides it); `act` is what act.py's Recoverer carries
    out. It rides in the decision, so the effects carry out exactly what was decided."""

    kind: str  # a fault kind, "gave_up" or "waiting"
    reason: str
    act: Literal["none", "restart", "replace", "release", "finish"]
    targets: tuple[str, ...] = ()  # pod ids to replace; () with act replace on a cluster: the whole cluster
    data_center: str | None = None  # where the faulty nodes run (recorded for the exclusion)
    data_center_order: tuple[str, ...] = ()  # the candidates, those that failed twice last
    avoided: tuple[str, ...] = ()  # the data centers that failed twice this run
    message: str = ""
    answered: tuple[str, ...] = ()  # the failed run states this recovery answers (run_key)
    cause: str | None = None  # a failed job's classified cause
    trials: tuple[int, ...] = ()  # a pool's trials (pod indices) it recovers: each has its own budget

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Plan:
        tuples = ("targets", "data_center_order", "avoided", "answered", "trials")
        return cls(**{**data, **{k: tuple(data.get(k) or ()) for k in tuples}})


@dataclass(frozen=True)
class RunState:
    """One job's own record in the bucket (`run/<run id>/state.json`), as read and verified this round."""

    run_id: str
    status: Literal["absent", "finished", "failed", "unreadable"]
    verified: bool = False  # finished, and the checkpoint it names is in the bucket with its size and sha256
    why: str = ""  # why it does not verify, in one line
    exit_status: int | None = None
    last_step: int | None = None
    final_loss: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    checkpoint_key: str | None = None
    failure: str | None = None  # a failed job's cause from its log (train/node/diagnostics.py)

    @property
    def key(self) -> str:
        """This state's identity: a failed state is answered once, by identity, never by comparing the node's
        finish time with the supervisor's clock."""
        return f"{self.run_id}@{self.finished_at}"


@dataclass(frozen=True)
class Observation:
    """Everything one round saw. None where a source could not be read (the reason is in `problems`)."""

    at: float  # Unix time of the round
    phase: str  # trainstack:run.phase
    nodes: int  # nodes in the stack's outputs (0: compute released or never up)
    node0_reachable: bool | None  # node 0 answered over SSH (None: no nodes)
    aggregator_age_s: float | None = None  # how old node 0's aggregator round is
    # The aggregator's own round stamp (node 0's clock): compared only with itself, never with `at` (#42).
    aggregator_round: float | None = None
    gpu_util_max: float | None = None  # ratio 0..1: the busiest node's mean GPU utilisation
    step: float | None = None  # the newest training step any node reports
    spent_usd: float | None = None  # RunPod billing so far (compute and storage of the stack)
    usd_per_hour: float = 0.0  # the stack's price now
    forecast_usd: float | None = None  # the forecast's cost of the whole run
    runs: tuple[RunState, ...] = ()
    problems: tuple[str, ...] = ()
    fleet: Fleet | None = None  # per node, and the run's recoveries (supervisor/faults.py)
    # Durations the nodes measured (their clocks' differences, never their timestamps): the goodput ledger's
    # checkpoint stalls and health-check time (supervisor/ledger.py).
    checkpoint_s: float | None = None  # the most any node's job says it spent saving since it started
    health_s: float | None = None  # the longest any node's health checks took on its boot
    # what the lifecycle (supervisor/lifecycle.py) needs beyond that.
    pods: tuple[str, ...] = ()  # the compute's pod ids, rank order: a new tuple is new compute (boot again)
    node_steps: tuple[float | None, ...] = ()  # each pod's newest step, as `pods` (a pool: each its own job)
    topology: str = "cluster"  # cluster | pods (a pool's pods each run their own job)
    exits: tuple[ExitFacts, ...] = ()  # nodes whose start script ended, from their exit records
    ranks: tuple[int, ...] = ()  # each pod's rank, as `pods` (a pool: its index; gaps where a trial ended)
    ssh_key: bool = True  # the supervisor has an SSH key (without one, no node can answer: not a lost node)
    created_at: float | None = None  # RunPod's creation time of the oldest live pod (bounds the spend)
    notices: tuple[str, ...] = ()  # the one-time messages already sent for this run (Decision.once)
    # A `scheduler: slurm` stack's queue on its controller (supervisor/slurm.py `queue_reading`): empty,
    # queued, running or unknown; None: not a Slurm stack, or the controller's Slurm was not read this round.
    slurm_queue: str | None = None
    # The spend bound persisted while billing is unreadable (supervisor/outage.py): the last bill
    # read plus the stack's $/h since, never limited to the history window. None: billed, or nothing carried.
    spend_bound_usd: float | None = None
    # The stack's own job (the newest of the configured name): its id and Slurm's state as Slurm wrote it
    # ("PENDING", "NODE_FAIL", "CANCELLED by 0"); None: not a Slurm stack, not read, or no such job yet.
    slurm_job: str | None = None
    slurm_state: str | None = None
    # The hosts that failed in this run (the bucket's hosts/failed/, train/node/hostid.py), one line each:
    # "<GPU UUIDs> (pod <id>: <reason>)", for the summary's support ticket.
    failed_hosts: tuple[str, ...] = ()

    @property
    def blind(self) -> bool:
        """No SSH to node 0 and no billing: nothing to decide from."""
        return self.nodes > 0 and self.node0_reachable is False and self.spent_usd is None

    @property
    def ended(self) -> tuple[ExitFacts, ...]:
        """The exit records that say a job ended by itself: failed or finished, and not answered by a
        recovery (a restart's new start script runs on). A `stopped` record is a stop someone made (a
        release's last sync, a restart), never a run's end."""
        answered = {k for a in (self.fleet.attempts if self.fleet else ()) for k in a.answered}
        return tuple(e for e in self.exits if e.status != "stopped" and e.key not in answered)

    @property
    def job_ids(self) -> tuple[str, ...]:
        """The run ids of this round's jobs (one per pool pod, one for a cluster)."""
        return tuple(r.run_id for r in self.runs)


@dataclass(frozen=True)
class Decision:
    """What to do this round and why, in one line."""

    kind: Kind
    reason: str
    actions: tuple[Action, ...] = ()
    message: str = ""  # the webhook text for `notify`
    plan: Plan | None = None  # a recovery's plan, carried out as decided (supervisor/act.py)
    state: str = ""  # the run's lifecycle state this round (supervisor/lifecycle.py)
    once: str = ""  # a notice sent once per run: its key, recorded when the message went out
    trials: tuple[int, ...] = ()  # end_trials: the pool's pod indices whose trial ended (run.ended_trials)


@dataclass(frozen=True)
class RoundRecord:
    """One audit line: the round's observation, decision and what was actually done."""

    stack: str
    observation: Observation
    decision: Decision
    done: tuple[str, ...] = ()  # actions carried out (a subset of decision.actions), in order
    holder: str = ""  # who ran the round
    dry_run: bool = False
    errors: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundRecord:
        obs = dict(data["observation"])
        obs["runs"] = tuple(RunState(**r) for r in obs.get("runs") or ())
        obs["problems"] = tuple(obs.get("problems") or ())
        obs["fleet"] = Fleet.from_json(obs["fleet"]) if obs.get("fleet") else None
        for key in ("pods", "notices", "ranks", "node_steps", "failed_hosts"):
            obs[key] = tuple(obs.get(key) or ())
        obs["exits"] = tuple(ExitFacts.from_json(e) for e in obs.get("exits") or ())
        dec = dict(data["decision"])
        dec["actions"] = tuple(dec.get("actions") or ())
        dec["trials"] = tuple(dec.get("trials") or ())
        dec["plan"] = Plan.from_json(dec["plan"]) if dec.get("plan") else None
        return cls(
            stack=str(data["stack"]),
            observation=Observation(**obs),
            decision=Decision(**dec),
            done=tuple(data.get("done") or ()),
            holder=str(data.get("holder") or ""),
            dry_run=bool(data.get("dry_run")),
            errors=tuple(data.get("errors") or ()),
        )


def newest_first(history: Sequence[RoundRecord]) -> list[RoundRecord]:
    return sorted(history, key=lambda r: r.observation.at, reverse=True)
