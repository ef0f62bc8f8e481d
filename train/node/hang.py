"""When a silent job is hung, from its own pace: pure functions the node's watchdog (train/node/watchdog.py)
and the launch (the process group's timeout, train/node/launch.py) share.

The agent feeds every progress line it reads (train/node/progress.py) and whether the job's busy marker is
there (`$TRAINSTACK_BUSY_FILE`: the job writes it before a checkpoint save or an evaluation and removes it
after; docs/NODE-HEALTH.md). From them `Pace` learns the run's own slowest step, its longest quiet spell that
ended by itself (the gap between two new steps, a sync checkpoint save between log lines included) and its
longest save (what `checkpoint_s` grew by between two lines). A job is hung when it has been silent for
longer than `limit_s`:

    max(floor_s, factor x slowest step, factor x longest gap, factor x longest save)
    ... and at least unlearned_s until the run has been seen through one save (a job that never reports
        checkpoint_s keeps it: its first save could be arbitrarily long, and PyTorch's own NCCL timeout is 10
        minutes), at least restart_s after the watchdog restarted the job, until its first new step,
        and at least busy_s (and factor x the longest busy spell) while the busy marker is there.

So a slow but healthy step, a save or an evaluation never reaches the bound, and a SIGSTOPped rank (its
peers wait in the next collective, no step anywhere) does after `floor_s` once the run's pace is known. The
numbers are `Bounds`; docs/RECOVERY.md says why each is what it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from train.node.progress import Progress

# Seconds the process group's timeout gives beyond the watchdog's bound: the watchdog acts first (with its
# diagnostics), NCCL's own watchdog is the backstop when the agent is gone.
PG_MARGIN_S = 60.0


@dataclass(frozen=True)
class Bounds:
    """The watchdog's numbers (env TRAINSTACK_HANG_<NAME>, e.g. TRAINSTACK_HANG_FLOOR_S, overrides each)."""

    factor: float = 4.0  # times the run's own slowest step / longest quiet spell / longest save
    floor_s: float = 90.0  # never sooner: a few agent samples (5 s) and a py-spy of every rank
    unlearned_s: float = 600.0  # until a save was seen: PyTorch's NCCL default, the old supervisor bound
    restart_s: float = 600.0  # after a restart until its first step: rendezvous, checkpoint load, step
    busy_s: float = 1800.0  # while the job says it saves or evaluates


@dataclass(frozen=True)
class Pace:
    """What the agent has seen of the run's pace; times are the agent's clock (seconds)."""

    step: int | None = None  # the newest step seen
    step_at: float | None = None  # when it was first seen (or when the watchdog last restarted the job)
    checkpoint_s: float | None = None  # the newest line's running total of save time
    slowest_step_s: float = 0.0  # the largest step_time_s any line reported
    longest_gap_s: float = 0.0  # the longest silence between two new steps that ended by itself
    longest_save_s: float = 0.0  # the largest growth of checkpoint_s between two lines
    longest_busy_s: float = 0.0  # the longest busy spell (marker present) that ended
    busy_since: float | None = None  # the marker is there since (None: not there)
    busy_in_gap: bool = False  # the marker was there during the current silence (its gap is not learned)
    learned: bool = False  # the run was seen through a save (checkpoint_s grew, or a busy spell ended)
    restarting: bool = False  # the watchdog restarted the job and no new step came yet


def advance(p: Pace, line: Progress | None, busy: bool, now: float) -> Pace:
    """The pace after one agent sample: the newest progress line read (None: nothing new) and the marker."""
    if busy and p.busy_since is None:
        p = replace(p, busy_since=now, busy_in_gap=True)
    elif not busy and p.busy_since is not None:
        p = replace(
            p, longest_busy_s=max(p.longest_busy_s, now - p.busy_since), busy_since=None, learned=True
        )
    if line is None or line.step == p.step:
        return p
    p = replace(p, slowest_step_s=max(p.slowest_step_s, line.step_time_s))
    saved = line.checkpoint_s
    if saved is not None:
        grew = saved - p.checkpoint_s if p.checkpoint_s is not None and saved >= p.checkpoint_s else saved
        if grew > 0:  # a fresh reader or a new start of the job: the whole total is an upper bound on a save
            p = replace(p, longest_save_s=max(p.longest_save_s, grew), learned=True)
        p = replace(p, checkpoint_s=saved)
    forward = p.step is not None and line.step > p.step
    if forward and p.step_at is not None and not p.busy_in_gap and not p.restarting:
        p = replace(p, longest_gap_s=max(p.longest_gap_s, now - p.step_at))
    return replace(p, step=line.step, step_at=now, busy_in_gap=p.busy_since is not None, restarting=False)


def limit_s(p: Pace, b: Bounds) -> float:
    """How long the job may be silent before it is called hung (the module docstring's formula)."""
    limit = max(
        b.floor_s, b.factor * p.slowest_step_s, b.factor * p.longest_gap_s, b.factor * p.longest_save_s
    )
    if not p.learned:
        limit = max(limit, b.unlearned_s)
    if p.restarting:
        limit = max(limit, b.restart_s)
    if p.busy_since is not None:
        limit = max(limit, b.busy_s, b.factor * p.longest_busy_s)
    return limit


def hung_for(p: Pace, b: Bounds, now: float) -> float | None:
    """The silence in seconds when it is past the limit, else None. Before the first step there is no pace:
    a start that never steps is the supervisor's (never_started), not the node's."""
    if p.step_at is None:
        return None
    silent = now - p.step_at
    return silent if silent > limit_s(p, b) else None


def restarted(p: Pace, now: float) -> Pace:
    """The pace after the watchdog ended the job's workers: the silence counts again from now, held to the
    restart's bound until the restarted job steps; what was learned stays."""
    return replace(p, step_at=now, restarting=True, busy_since=None, busy_in_gap=False)


def pg_timeout_s(p: Pace, b: Bounds) -> float:
    """The process group's timeout for a job (re)started now: the longest the watchdog could wait (a busy
    spell included where the job marks them, since its peers wait in a collective while one rank saves),
    plus a margin, so the watchdog acts first and NCCL's own watchdog is only the backstop."""
    if p.longest_busy_s > 0 or p.busy_since is not None:
        p = replace(p, busy_since=0.0)  # as if busy: the bound of a marked save
    return limit_s(replace(p, restarting=False), b) + PG_MARGIN_S


def bounds_from_env(env: dict[str, str] | None = None) -> Bounds:
    """`Bounds` with TRAINSTACK_HANG_FACTOR / _FLOOR_S / _UNLEARNED_S / _RESTART_S / _BUSY_S laid over.
    A value that is not a positive number is a ValueError naming the variable."""
    import os

    env = dict(os.environ) if env is None else env
    values = {}
    for name in ("factor", "floor_s", "unlearned_s", "restart_s", "busy_s"):
        key = f"TRAINSTACK_HANG_{name.upper()}"
        if env.get(key):
            try:
                value = float(env[key])
            except ValueError:
                value = -1.0
            if not value > 0 or value == float("inf"):
                raise ValueError(f"{key}={env[key]!r} is not a positive number of seconds (or factor)")
            values[name] = value
    return Bounds(**values)
