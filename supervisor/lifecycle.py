"""A run's lifecycle as one state machine: every state a run can be in, the rules of supervisor/rules/ that
own it, its deadline and the bound in words, gathered from the rules' own declarations (each state is
described once, by the room that owns it first; its owners are the rules that list it in `owns`).

    no_compute -> booting -first step-> training -run state-> finished -> released
                     |                  | \\-stall, lost, unhealthy-> recovering -> training
                     |                  |                              \\-budget spent-> gave_up -> released
                     |                  \\-GPUs idle, no step-> idle -grace-> released
                     \\-exit record, boot_timeout-> failed -> released

A `scheduler: slurm` stack whose queue holds a job waiting (or one in a state trainstack does not know) is
`queued`: Slurm's wait, never idle; an empty queue is `idle` (rules/slurm.py's `slurm_queue_empty`).
A pool's trial that ends while others run is `trial_ended`: its pod alone is released.
`unreachable` (no SSH: no key, or the network) and `unverified` (a finished state that does not verify) can
happen in any state with compute; `over_budget` releases from any of them. The deadlines are in minutes from
the first round at which no useful work is possible. docs/SUPERVISOR.md's table is `state_table()`'s
(tests/supervisor/test_rooms.py); tests/supervisor/test_lifecycle_properties.py holds the deadlines on
generated runs.

    python -m supervisor.lifecycle       # prints the table for docs/SUPERVISOR.md
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from supervisor.decide import RULES
from supervisor.policy import Policy
from supervisor.rules import alerts, boot, budget, idle, pool, recovery, release, slurm
from supervisor.rules.base import Rule, State

# prod as shipped: 64 x H100 at this price, with its 10-min burn-in (docs/SUPERVISOR.md's worst cases)
PROD_USD_PER_HOUR = 255.0
PROD_BURN_IN_MIN = 10.0


@dataclass(frozen=True)
class StateSpec:
    owner: str  # the rules that own it, in decide's order ("a / b")
    acts: str  # what they do
    deadline_min: Callable[[Policy], float | None]  # None: no deadline of its own (the cap is its bound)
    bound: str  # the deadline in words


def _nothing(_p: Policy) -> float:
    return 0.0


DECLARED: tuple[State, ...] = (
    State("no_compute", "nothing bills but storage", _nothing, "nothing to release"),
    *boot.STATES,
    *budget.STATES,
    *release.STATES,
    *idle.STATES,
    *slurm.STATES,
    *recovery.STATES,
    *alerts.STATES,
    *pool.STATES,
)


def states(rules: Sequence[Rule] = RULES, declared: Sequence[State] = DECLARED) -> dict[str, StateSpec]:
    """Each declared state with its owners; a state no rule owns is decide's own `none` ("(none)")."""
    out = {}
    for s in declared:
        owners = [r.name for r in rules if s.name in r.owns]
        out[s.name] = StateSpec(" / ".join(owners) or "(none)", s.acts, s.deadline_min, s.bound)
    return out


STATES: dict[str, StateSpec] = states()


def worst_case(spec: StateSpec, policy: Policy, usd_per_hour: float = PROD_USD_PER_HOUR) -> str:
    minutes = spec.deadline_min(policy)
    if minutes is None:
        return "the cap (`run.max_cost_usd`)"
    return f"{minutes:g} min: **${usd_per_hour * minutes / 60:,.0f}**"


def state_table(policy: Policy | None = None) -> str:
    """docs/SUPERVISOR.md's lifecycle table: every state but no_compute, its owners, what they do, the
    deadline and its worst case on prod (defaults, prod's burn-in, $255/h)."""
    policy = policy or Policy(burn_in_min=PROD_BURN_IN_MIN, recovery=None)
    lines = [
        "| state | owner rules | what they do | deadline | worst case on prod |",
        "|---|---|---|---|---|",
    ]
    for name, spec in STATES.items():
        if name == "no_compute":
            continue
        owners = ", ".join(f"`{o}`" for o in spec.owner.split(" / "))
        lines.append(f"| `{name}` | {owners} | {spec.acts} | {spec.bound} | {worst_case(spec, policy)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(state_table())
