"""`trainstack:supervisor` and `trainstack:run`: when compute is released, and the run's phase and cost cap.

    trainstack:supervisor:
      enabled: true                 # scripts/supervise acts on this stack (on for the shipped stacks)
      dry_run: false                # decide and report, never act
      interval_min: 5               # a round this often when scripts/supervise loops (CI runs --once)
      idle_util_pct: <pct>          # GPU utilisation under this ...
      idle_for_min: <min>           # ... for this long with no new step: the run is idle
      idle_grace_min: <min>         # after the idle warning, release when still idle this much later
                                    # (these three left unset: the idle rule's own defaults, declared
                                    # once in supervisor/rules/idle.py DEFAULTS)
      warn_at: 0.8                  # warn when the run has spent this share of run.max_cost_usd
      blind_for_min: 15             # no SSH to node 0 and no billing this long: alert (never act blind)
      boot_timeout_min: 30          # no training step this long after the compute came up (training's
                                    # burn_in_min is added): the job never started, release
      sync_grace_s: 60              # a last checkpoint sync on each answering node gets this long
      release_mode: delete          # loose pods at release: delete, or stop (on-demand pods only)
    trainstack:run:
      phase: active                 # active | releasing | released (the supervisor writes it)
      max_cost_usd: 0               # the run's one cost cap (0: none): alerts, policy pack, supervisor

`run.phase` is what the program declares: `active` every resource; `releasing` the same, with the compute
(pods or cluster) unprotected so the next step may remove it even with `trainstack:protect` on; `released` no
pods and no cluster (with `release_mode: stop`, the loose pods declared stopped), the volume, bucket and
secrets kept. docs/SUPERVISOR.md explains each decision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Phase = Literal["active", "releasing", "released", "recovering"]  # recovering: #29
RUN_CAP_KEY = "trainstack:run.max_cost_usd"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class SupervisorConfig(_Section):
    """The supervisor's thresholds (minutes, percent, a share of the cap)."""

    enabled: bool = True
    dry_run: bool = False
    interval_min: float = Field(5.0, gt=0, le=1440)
    # None: the idle rule's own default (supervisor/rules/idle.py DEFAULTS, the one place it is declared;
    # this lower layer cannot import it). A stack that sets one is validated here.
    idle_util_pct: float | None = Field(None, ge=0, le=100)
    idle_for_min: float | None = Field(None, gt=0)
    idle_grace_min: float | None = Field(None, ge=0)
    warn_at: float = Field(0.8, gt=0, le=1)
    blind_for_min: float = Field(15.0, gt=0)
    # A cold pull of a multi-GB training image, the GPU health gate, the straggler GEMM and the all-reduce
    # sweep: minutes each (docs/SUPERVISOR.md "Booting"); the configured burn-in is added on top.
    boot_timeout_min: float = Field(30.0, gt=0, le=1440)
    sync_grace_s: float = Field(60.0, ge=0, le=600)
    # What `run.phase: released` does to loose pods: delete them, or stop them (an EXITED pod bills only its
    # volume disk; the next active `up` starts the same pods). Clusters and spot pods: delete only
    # (stackconfig/rules.py, docs/SUPERVISOR.md).
    release_mode: Literal["delete", "stop"] = "delete"


class RunConfig(_Section):
    """The run's phase (written by the supervisor) and its one cost cap."""

    phase: Phase = "active"
    max_cost_usd: float = Field(0.0, ge=0)
    # A pool's trials (pod indices) whose job has ended while others still run (topology pods): written by
    # the supervisor; their pods are released alone (stopped under release_mode stop, else deleted), the
    # other trials' pods and files stay as they are (docs/SUPERVISOR.md "Pools").
    ended_trials: tuple[int, ...] = ()
    # On a protected stack (trainstack:protect) the trials about to end: their pods' protection is lifted
    # first, by an update that changes nothing else (as `releasing` does for the whole compute).
    releasing_trials: tuple[int, ...] = ()

    @field_validator("ended_trials", "releasing_trials", mode="before")
    @classmethod
    def _trial_list(cls, v: Any) -> Any:
        return tuple(v) if isinstance(v, list) else v  # YAML and JSON give a list; strict wants the tuple


# ---- trainstack:recovery: when the supervisor brings a broken run back ---------------------


class RecoveryConfig(_Section):
    """`trainstack:recovery`: the supervisor's recovery thresholds and bounds (docs/RECOVERY.md).

    trainstack:recovery:
      enabled: true                 # recover stalled, lost, unhealthy and preempted runs
      hang_after_min: 10            # no new step this long while every node answers: a hang the supervisor
                                    # acts on (at least 2 x the run's slowest step and longest quiet spell)
      unreachable_rounds: 2         # ignored (lost is RunPod's word only); still accepted
      max_recoveries: 3             # per run; past it compute is released ("gave up")
      backoff_min: 10               # the wait after a recovery before the next one, doubled each time
      straggler_tolerance_pct: 20   # a node this much slower than the others' median step time ...
      straggler_for_min: 10         # ... for this long is a straggler (unhealthy)
      avoid_data_centers: []        # the supervisor writes it: data centers tried last for new pods
    """

    enabled: bool = True
    # 10: PyTorch's default NCCL process-group timeout (torch.distributed.init_process_group), after which
    # its watchdog aborts a collective still pending; supervisor/recover.py stall_threshold_s. Not the
    # alert: trainstack:alerts.stalled_after_min (15) tells a person, this one makes the supervisor act
    # (diagnose, then restart). Formerly `stalled_after_min` here too, still read (stackconfig/loader.py).
    hang_after_min: float = Field(10.0, gt=0)
    unreachable_rounds: int = Field(2, ge=1, le=100)
    max_recoveries: int = Field(3, ge=0, le=50)
    backoff_min: float = Field(10.0, ge=0)
    straggler_tolerance_pct: float = Field(20.0, gt=0, le=100)
    straggler_for_min: float = Field(10.0, gt=0)
    # Written by the supervisor: data centers that failed twice this run, tried last for new pods.
    avoid_data_centers: tuple[str, ...] = Field((), strict=False)  # a YAML list


def data_center_order(candidates: Sequence[str], avoided: Sequence[str]) -> tuple[str, ...]:
    """The stack's candidates with the avoided ones moved last (their own order kept)."""
    return tuple([dc for dc in candidates if dc not in avoided] + [dc for dc in candidates if dc in avoided])
