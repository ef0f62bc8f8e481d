"""The node's hang bound (train/node/hang.py): each side of each bound, as plain function calls."""

from __future__ import annotations

import pytest

from train.node import hang
from train.node.progress import Progress

B = hang.Bounds()  # factor 4, floor 90 s, unlearned 600 s, restart 600 s, busy 1800 s


def line(step: int, step_time_s: float = 0.5, checkpoint_s: float | None = 0.0) -> Progress:
    return Progress(step, step_time_s, 100.0, None, 1.0, None, checkpoint_s)


def run(lines: list[tuple[float, Progress | None, bool]]) -> hang.Pace:
    """The pace after these samples: (agent's time, newest line or None, busy marker there)."""
    p = hang.Pace()
    for now, got, busy in lines:
        p = hang.advance(p, got, busy, now)
    return p


def learned(at: float = 0.0) -> hang.Pace:
    """A run seen through one 2 s save, stepping every 10 s: its bound is the floor (4 x 10 s < 90 s)."""
    return run(
        [
            (at, line(10), False),
            (at + 10, line(20, checkpoint_s=2.0), False),
            (at + 20, line(30, 0.5, 2.0), False),
        ]
    )


def test_a_sigstopped_rank_is_a_hang_just_past_the_floor_not_before() -> None:
    p = learned()
    assert hang.limit_s(p, B) == B.floor_s
    assert hang.hung_for(p, B, 20 + B.floor_s) is None
    assert hang.hung_for(p, B, 20 + B.floor_s + 1) == pytest.approx(B.floor_s + 1)


def test_a_slow_but_healthy_step_is_never_a_hang() -> None:
    # 300 s steps (a huge model): the bound is 4 steps, not the floor.
    p = run([(0, line(1, 300.0), False), (300, line(2, 300.0, checkpoint_s=1.0), False)])
    assert hang.limit_s(p, B) == 4 * 300.0
    assert hang.hung_for(p, B, 300 + 1100) is None  # the next step is late, still under the bound
    assert hang.hung_for(p, B, 300 + 1201) is not None


def test_a_quiet_spell_the_run_came_out_of_raises_the_bound() -> None:
    p = learned()
    p = hang.advance(p, line(40, 0.5, 2.0), False, 20 + 50)  # a 50 s gap that ended by itself
    assert hang.limit_s(p, B) == 4 * 50
    assert hang.hung_for(p, B, 70 + 199) is None and hang.hung_for(p, B, 70 + 201) is not None


def test_a_long_checkpoint_save_is_never_a_hang() -> None:
    # Learned from checkpoint_s: a save of 100 s between two lines.
    p = run(
        [
            (0, line(10), False),
            (10, line(20, checkpoint_s=1.0), False),
            (120, line(30, checkpoint_s=101.0), False),
        ]
    )
    assert hang.limit_s(p, B) >= 4 * 100
    # Marked: the job is saving for 25 minutes, far past the floor, under the busy bound.
    p = learned()
    p = hang.advance(p, None, True, 25)
    assert hang.hung_for(p, B, 20 + 25 * 60) is None
    assert hang.hung_for(p, B, 20 + B.busy_s + 1) is not None  # a save that never ends is a hang too
    # The marker gone, the silence is held to the step's bound again.
    p = hang.advance(p, None, False, 20 + 100)
    assert hang.hung_for(p, B, 20 + 101) is not None


def test_an_evaluation_is_never_a_hang_and_its_length_is_learned() -> None:
    p = learned()
    p = hang.advance(p, None, True, 21)  # evaluating
    assert hang.hung_for(p, B, 21 + 1700) is None
    p = hang.advance(p, None, False, 21 + 1700)  # done after 1,700 s
    p = hang.advance(p, line(40, 0.5, 2.0), False, 21 + 1705)
    assert p.longest_gap_s < 1700  # a busy gap is not learned as a quiet spell of training
    p = hang.advance(p, None, True, 21 + 1800)  # the next evaluation may take 4 x 1,700 s
    assert hang.limit_s(p, B) == 4 * 1700


def test_before_any_save_the_bound_is_pytorchs_ten_minutes() -> None:
    p = run([(0, line(10, checkpoint_s=None), False), (10, line(20, checkpoint_s=None), False)])
    assert not p.learned
    assert hang.hung_for(p, B, 10 + 599) is None and hang.hung_for(p, B, 10 + 601) is not None


def test_before_the_first_step_there_is_no_hang() -> None:
    assert hang.hung_for(hang.Pace(), B, 10**9) is None


def test_a_restart_is_given_its_own_bound_until_it_steps() -> None:
    p = hang.restarted(learned(), 200)
    assert hang.hung_for(p, B, 200 + 599) is None and hang.hung_for(p, B, 200 + 601) is not None
    p = hang.advance(p, line(21, 0.5, 0.0), False, 400)  # resumed from step 20: a new start of the job
    assert not p.restarting and p.longest_gap_s == 10  # the restart's silence is not learned
    assert hang.hung_for(p, B, 400 + B.floor_s + 1) is not None


def test_the_process_groups_timeout_follows_the_same_pace() -> None:
    assert hang.pg_timeout_s(hang.Pace(), B) == B.unlearned_s + hang.PG_MARGIN_S
    assert hang.pg_timeout_s(learned(), B) == B.floor_s + hang.PG_MARGIN_S
    marked = hang.advance(hang.advance(learned(), None, True, 21), None, False, 31)
    assert hang.pg_timeout_s(marked, B) == B.busy_s + hang.PG_MARGIN_S  # peers wait while one rank saves


def test_bounds_from_env_names_a_bad_variable() -> None:
    assert hang.bounds_from_env({"TRAINSTACK_HANG_FLOOR_S": "30"}).floor_s == 30
    with pytest.raises(ValueError, match="TRAINSTACK_HANG_BUSY_S"):
        hang.bounds_from_env({"TRAINSTACK_HANG_BUSY_S": "soon"})
    with pytest.raises(ValueError, match="TRAINSTACK_HANG_FACTOR"):
        hang.bounds_from_env({"TRAINSTACK_HANG_FACTOR": "-1"})
