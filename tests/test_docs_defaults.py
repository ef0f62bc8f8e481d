"""Every default the docs state is the code's: each defaults table read and compared with the pydantic models
(`stackconfig/`), `THRESHOLDS` (`train/monitor/rules.py`) and the environment knobs (`providers/settings.py`).

A default is written once, in the code; a doc that shows it is checked here, so a change of the code that
forgets the doc fails. Plain file reads and model introspection: no engine, no server.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from providers.settings import HOST_KNOBS, KNOBS
from stackconfig.alerts import AlertsConfig
from stackconfig.config import BucketConfig, ClusterConfig, TrainingConfig
from stackconfig.supervisor import RecoveryConfig, RunConfig, SupervisorConfig
from supervisor.rules import idle
from train.monitor.rules import BY_CONFIG_KEY

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _default(model: type[BaseModel], field: str) -> Any:
    """The model's default; the idle thresholds' (None in the config) are the idle rule's own."""
    if model is SupervisorConfig and field in idle.DEFAULTS:
        return idle.DEFAULTS[field]  # type: ignore[index]
    value = model.model_fields[field].default
    return list(value) if isinstance(value, tuple) else value


def _table(doc: str, first_header: str) -> list[dict[str, str]]:
    """The rows of the Markdown table in docs/<doc> whose header row starts with `| <first_header> |`."""
    lines = (DOCS / doc).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)))
    return rows


def _number(text: str) -> float:
    return float(text.replace(",", ""))


# ---- docs/MONITORING.md: the alert rules against THRESHOLDS -----------------------------------------------


def test_monitoring_rules_table_defaults_are_thresholds() -> None:
    """Each row's config keys (in the order "fires when" names them) against the numbers of its default."""
    checked = set()
    for row in _table("MONITORING.md", "rule"):
        keys = [k.removeprefix("alerts.") for k in re.findall(r"`([\w.:]+)`", row["fires when"])]
        keys = [k for k in keys if k in BY_CONFIG_KEY]
        numbers = [_number(n) for n in re.findall(r"\d[\d,.]*", row["default"])]
        assert len(numbers) == len(keys), f"MONITORING.md {row['rule']}: defaults {numbers}, keys {keys}"
        for key, number in zip(keys, numbers, strict=True):
            assert number == BY_CONFIG_KEY[key].default, (
                f"docs/MONITORING.md says {key} defaults to {number:g}; THRESHOLDS says "
                f"{BY_CONFIG_KEY[key].default:g} (train/monitor/rules.py)"
            )
            checked.add(key)
    assert checked >= {"util_low_pct", "stalled_after_min", "startup_grace_min", "unreachable_after_rounds"}


def test_alerts_config_defaults_come_from_thresholds() -> None:
    """The doc is checked against THRESHOLDS; the config model takes its defaults from the same table."""
    for key, threshold in BY_CONFIG_KEY.items():
        assert _default(AlertsConfig, key) == threshold.default, key


# ---- docs/RECOVERY.md and docs/SUPERVISOR.md: the config sections -----------------------------------------


def test_recovery_table_is_the_recovery_model() -> None:
    rows = {r["key"].strip("`"): r["default"] for r in _table("RECOVERY.md", "key")}
    assert set(rows) == set(RecoveryConfig.model_fields), "docs/RECOVERY.md's config table lists every key"
    for key, shown in rows.items():
        assert yaml.safe_load(shown) == _default(RecoveryConfig, key), (
            f"docs/RECOVERY.md says recovery.{key} defaults to {shown}; "
            f"stackconfig/supervisor.py says {_default(RecoveryConfig, key)!r}"
        )


def _yaml_block_after(doc: str, heading: str) -> dict[str, Any]:
    """The indented YAML block under a heading (the form the stack file takes)."""
    text = (DOCS / doc).read_text()
    section = text[text.index(heading) :]
    block = re.search(r"\n\n((?: {4}.*\n)+)", section)
    assert block, f"docs/{doc}: no indented YAML block under {heading!r}"
    loaded = yaml.safe_load("\n".join(line[4:] for line in block.group(1).splitlines()))
    assert isinstance(loaded, dict)
    return loaded


def test_supervisor_and_run_block_is_the_models() -> None:
    block = _yaml_block_after("SUPERVISOR.md", "## `trainstack:supervisor` and `trainstack:run`")
    for section, model in (("trainstack:supervisor", SupervisorConfig), ("trainstack:run", RunConfig)):
        shown = block[section]
        assert set(shown) == set(model.model_fields), f"docs/SUPERVISOR.md's {section} lists every key"
        for key, value in shown.items():
            assert value == _default(model, key), (
                f"docs/SUPERVISOR.md says {section}.{key} defaults to {value!r}; "
                f"stackconfig/supervisor.py says {_default(model, key)!r}"
            )


# ---- defaults restated in prose: "`key` (default N)" ---------------------------------------------------

# The sections a bare key in each doc belongs to (a key is looked up in the first that has it); a key written
# `section.key` or `trainstack:section.key` is looked up there, in any doc.
SECTIONS: dict[str, type[BaseModel]] = {
    "alerts": AlertsConfig,
    "supervisor": SupervisorConfig,
    "run": RunConfig,
    "recovery": RecoveryConfig,
    "training": TrainingConfig,
    "cluster": ClusterConfig,
    "bucket": BucketConfig,
}
CONTEXT: dict[str, tuple[str, ...]] = {
    "MONITORING.md": ("alerts",),
    "SUPERVISOR.md": ("supervisor", "run", "recovery"),
    "RECOVERY.md": ("recovery",),
    "NODE-HEALTH.md": ("training",),
    "OPERATING.md": (),
    "ARCHITECTURE.md": (),
    "PREVIEW-REPORT.md": (),
    "RELIABILITY.md": (),  # its figures are of the stacks it ran: only a `section.key` is a default
    "TEAM-BUDGET.md": (),
    "TOOLCHAIN.md": (),
}
_RESTATED = re.compile(
    r"`(?:trainstack:)?(?:(?P<section>[a-z_]+)\.)?(?P<key>[a-z_]+)`\s+\(?(?P<default>default\s+)?"
    r"(?P<value>\d[\d.]*)(?:\s*(?:%|min|s|USD))?\s*[);,]"
)


def _restatements(doc: str, text: str) -> list[tuple[str, str, float, Any]]:
    """(section, key, value shown, model default) for each "`key` (N)" whose key is a config key."""
    found = []
    for m in _RESTATED.finditer(text):
        sections = (m["section"],) if m["section"] else CONTEXT[doc]
        for section in sections:
            model = SECTIONS.get(section)
            if model is not None and m["key"] in model.model_fields:
                found.append((section, m["key"], float(m["value"]), _default(model, m["key"])))
                break
    return found


@pytest.mark.parametrize("doc", sorted(CONTEXT))
def test_defaults_restated_in_prose_are_the_models(doc: str) -> None:
    wrong = [
        f"{section}.{key}: the doc says {value:g}, the model {default!r}"
        for section, key, value, default in _restatements(doc, (DOCS / doc).read_text())
        if value != default
    ]
    assert not wrong, f"docs/{doc} restates defaults that are not the code's: {wrong}"


def test_the_restatement_check_can_fail() -> None:
    text = "`idle_for_min` (31), `recovery.max_recoveries` (3), `training.nccl_min_busbw_gb_per_s` (2 or so)"
    assert _restatements("SUPERVISOR.md", text) == [
        ("supervisor", "idle_for_min", 31.0, 30.0),
        ("recovery", "max_recoveries", 3.0, 3),
    ]


# ---- docs/OPERATING.md: the environment knobs --------------------------------------------------------------


def test_operating_lists_every_knob_with_its_default() -> None:
    shown = {r["variable"].strip("`"): r["default"] for r in _table("OPERATING.md", "variable")}
    assert shown == {k.env: k.default for k in (*KNOBS, *HOST_KNOBS)}, (
        "docs/OPERATING.md's knob table and providers/settings.py KNOBS + HOST_KNOBS differ"
    )


_KNOB_RESTATED = re.compile(
    r"`\$?(?P<env>[A-Z][A-Z0-9_]+)`[^.;\n]{0,12}?\((?:default )?(?P<value>\d+)\b(?!\s*=)"
)


def _knob_restatements(text: str) -> list[tuple[str, str]]:
    knobs = {k.env for k in (*KNOBS, *HOST_KNOBS)}
    return [(m["env"], m["value"]) for m in _KNOB_RESTATED.finditer(text) if m["env"] in knobs]


@pytest.mark.parametrize("doc", sorted(CONTEXT))
def test_knob_defaults_restated_are_settings(doc: str) -> None:
    defaults = {k.env: k.default for k in (*KNOBS, *HOST_KNOBS)}
    wrong = [
        f"{env}: {value}"
        for env, value in _knob_restatements((DOCS / doc).read_text())
        if value != defaults[env]
    ]
    assert not wrong, f"docs/{doc} restates knob defaults that are not providers/settings.py's: {wrong}"


def test_the_knob_check_can_fail() -> None:
    text = "`TRAINSTACK_PROVIDER_WORKERS` threads (default 32, 1-1024) and `TRAINSTACK_ENGINE_CHECK_S` (10)"
    assert _knob_restatements(text) == [
        ("TRAINSTACK_PROVIDER_WORKERS", "32"),
        ("TRAINSTACK_ENGINE_CHECK_S", "10"),
    ]


def test_host_knob_defaults_are_the_hosts_own() -> None:
    """HOST_KNOBS (and so OPERATING.md's table) against the code that reads them before any Python of ours."""
    repo = DOCS.parent
    host = {k.env: k.default for k in HOST_KNOBS}
    dynhost = (repo / "tools/pulumi/dynhost/trainstack_dynamic_host.py").read_text()
    assert re.search(rf"^DEFAULT_WORKERS = {host['TRAINSTACK_PROVIDER_WORKERS']}$", dynhost, re.M)
    langhost = (repo / "tools/pulumi/langhost/main.go").read_text()
    assert f"return {host['TRAINSTACK_ENGINE_CHECK_S']} * time.Second, nil" in langhost
    assert 'os.Getenv("TRAINSTACK_EARLY_PROVIDER") == "0"' in langhost  # on unless "0"
    assert host["TRAINSTACK_EARLY_PROVIDER"] == "1"
    from common.pulumi import environment  # what scripts/env.sh exports

    given = environment({"HOME": "/nonexistent", "PATH": "/usr/bin"})
    assert given["PULUMI_PARALLEL"] == host["PULUMI_PARALLEL"]
    assert given["GOGC"] == host["GOGC"]
    assert environment({"HOME": "/nonexistent", "PATH": "/usr/bin", "GOGC": "50"})["GOGC"] == "50"  # yours
