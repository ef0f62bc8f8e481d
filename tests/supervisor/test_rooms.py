"""The rules' rooms (issue #63): each rule declares the states it owns, its deadline and its look-back, and
what is said about them elsewhere is read from those declarations, never written again."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from supervisor.cli import history_window_s
from supervisor.decide import RULES, look_back_min
from supervisor.lifecycle import STATES, state_table
from supervisor.policy import Policy
from supervisor.rules import idle
from tests.supervisor.test_decide import ROWS

REPO = Path(__file__).resolve().parents[2]


def test_docs_state_table_is_the_rules_own() -> None:
    doc = (REPO / "docs" / "SUPERVISOR.md").read_text()
    assert state_table() in doc, "docs/SUPERVISOR.md's state table: paste `python -m supervisor.lifecycle`"


def test_state_table_follows_a_rule_declaration() -> None:
    """A rule that stops owning a state leaves the table (the table is not a copy)."""
    from supervisor import lifecycle
    from supervisor.rules.base import Rule

    without = tuple(r for r in RULES if r.name != "slurm_queue_empty")
    table = lifecycle.states(without)
    assert table["idle"].owner == "idle" and STATES["idle"].owner == "slurm_queue_empty / idle"
    assert isinstance(RULES[0], Rule)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name)
def test_each_rule_says_only_states_it_owns(row: object) -> None:
    for rule in RULES:
        decision = rule(row.now, row.history, row.policy)  # type: ignore[attr-defined]
        if decision is not None:
            assert decision.state in rule.owns, (rule.name, decision)


def test_every_owned_state_is_declared_once() -> None:
    owned = {s for r in RULES for s in r.owns}
    assert owned <= set(STATES), owned - set(STATES)
    assert all(spec.owner != "(none)" for name, spec in STATES.items() if name != "no_compute")


def test_changing_the_idle_default_moves_everything_that_depends_on_it() -> None:
    """The idle thresholds are read from the config, and the only arithmetic on them is rules/idle.py's:
    another default moves the lifecycle's deadline, the docs' table and the round's history window."""
    longer = Policy(idle_for_min=45.0)
    assert idle.deadline_min(longer) == 45 + 15 + 2 * 5
    assert STATES["idle"].deadline_min(longer) == 70
    assert "| 70 min: **$298** |" in state_table(Policy(idle_for_min=45.0, burn_in_min=10))
    assert look_back_min(longer) == 70 + 10 > look_back_min(Policy())


def test_only_the_idle_room_computes_with_idle_thresholds() -> None:
    uses = {
        str(p.relative_to(REPO))
        for p in (REPO / "supervisor").rglob("*.py")
        if re.search(r"\.idle_(for|grace)_min\b|\bthreshold\(\w+, \"idle_(for|grace)_min\"\)", p.read_text())
    }
    assert uses == {"supervisor/rules/idle.py"}, uses


def test_the_idle_defaults_are_declared_by_the_idle_rule_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Changing an idle default touches rules/idle.py (and this test): the config leaves the three unset, the
    rule resolves them, and what depends on them (deadline, docs' table, history window) follows the rule."""
    from stackconfig.supervisor import SupervisorConfig

    declared = {k: SupervisorConfig.model_fields[k].default for k in idle.DEFAULTS}
    assert declared == dict.fromkeys(idle.DEFAULTS)
    assert {k: idle.threshold(Policy(), k) for k in idle.DEFAULTS} == idle.DEFAULTS
    assert idle.threshold(Policy(idle_for_min=45.0), "idle_for_min") == 45.0  # a stack's own value wins
    monkeypatch.setitem(idle.DEFAULTS, "idle_for_min", 40.0)
    assert idle.deadline_min(Policy()) == 40 + 15 + 2 * 5 == STATES["idle"].deadline_min(Policy())
    assert "| 65 min: **$276** |" in state_table(Policy(burn_in_min=10))
    assert look_back_min(Policy()) == 65 + 10


def test_no_other_module_spells_an_idle_default() -> None:
    """Outside the rule's file, no code or config file writes an idle threshold with its default's number."""
    pattern = re.compile(
        r"idle_(util_pct|for_min|grace_min)\b[^\n]*?\b({})\b".format(
            "|".join(f"{v:g}(?:\\.0)?" for v in idle.DEFAULTS.values())
        )
    )
    spelled = {
        str(p.relative_to(REPO))
        for folder in ("stackconfig", "supervisor", "forecast", "report", "components", "stacks", "scripts")
        if (REPO / folder).is_dir()
        for p in (REPO / folder).rglob("*")
        if p.suffix in (".py", ".yaml", ".yml") and pattern.search(p.read_text())
    }
    assert spelled == {"supervisor/rules/idle.py"}, spelled


def test_history_window_is_the_longest_rule_look_back() -> None:
    from stackconfig.loader import load_stack_config

    config = load_stack_config({"trainstack:supervisor": {"idle_for_min": 100}})
    assert history_window_s(config) == (100 + 15 + 2 * 5 + 2 * 5) * 60


# Grown past 400 by issue #65's goodput ledger (supervisor/firstround.py's caller) after this issue split the
# others: its own owner's to split, listed so that no other module joins it.
KNOWN_LONG = {"supervisor/ledger.py"}


def test_no_supervisor_module_over_400_lines() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in (REPO / "supervisor").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert set(long) <= KNOWN_LONG, long
