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
    # issue #29 (supervisor/recover.py)
    "job_failed",
    "preempted",
    "node_lost",
    "node_unhealthy",
    "stalled",
    "recovering",
    "gave_up",
]
# notify: one webhook message; sync: a last checkpoint sync on each node that answers; release: the Pulumi
# update that removes the compute; summary: the run's summary message once the release is done.
Action = Literal["notify", "sync", "release", "summary", "recover"]  # recover: supervisor/recover_act.py


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
    failure: str | None = None  # a failed job's cause from its log (train/node/diagnostics.py), issue #29


@dataclass(frozen=True)
class Observation:
    """Everything one round saw. None where a source could not be read (the reason is in `problems`)."""

    at: float  # Unix time of the round
    phase: str  # trainstack:run.phase
    nodes: int  # nodes in the stack's outputs (0: compute released or never up)
    node0_reachable: bool | None  # node 0 answered over SSH (None: no nodes)
    aggregator_age_s: float | None = None  # how old node 0's aggregator round is
    gpu_util_max: float | None = None  # ratio 0..1: the busiest node's mean GPU utilisation
    step: float | None = None  # the newest training step any node reports
    spent_usd: float | None = None  # RunPod billing so far (compute and storage of the stack)
    usd_per_hour: float = 0.0  # the stack's price now
    forecast_usd: float | None = None  # the forecast's cost of the whole run
    runs: tuple[RunState, ...] = ()
    problems: tuple[str, ...] = ()
    fleet: Fleet | None = None  # per node, and the run's recoveries (supervisor/faults.py, issue #29)
    # Durations the nodes measured (their clocks' differences, never their timestamps): the goodput ledger's
    # checkpoint stalls and health-check time (supervisor/ledger.py).
    checkpoint_s: float | None = None  # the most any node's job says it spent saving since it started
    health_s: float | None = None  # the longest any node's health checks took on its boot

    @property
    def blind(self) -> bool:
        """No SSH to node 0 and no billing: nothing to decide from."""
        return self.nodes > 0 and self.node0_reachable is False and self.spent_usd is None


@dataclass(frozen=True)
class Decision:
    """What to do this round and why, in one line."""

    kind: Kind
    reason: str
    actions: tuple[Action, ...] = ()
    message: str = ""  # the webhook text for `notify`


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
        dec = dict(data["decision"])
        dec["actions"] = tuple(dec.get("actions") or ())
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
