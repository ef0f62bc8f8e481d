"""Policy config files are checked by our scripts before the CLI reads them: file, key and fix named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from policy.config_file import CONFIG_MODELS, deprecation_notices, main, problems_in
from policy.rules import ALL_POLICIES

REPO = Path(__file__).resolve().parents[2]
PROD = json.loads((REPO / "policy/config/prod.json").read_text())


def test_every_policy_has_its_model() -> None:
    assert set(CONFIG_MODELS) == {p.name for p in ALL_POLICIES}
    assert all(CONFIG_MODELS.values()), [n for n, m in CONFIG_MODELS.items() if m is None]


@pytest.mark.parametrize("path", sorted((REPO / "policy/config").glob("*.json")), ids=lambda p: p.name)
def test_shipped_files_are_valid(path: Path) -> None:
    assert problems_in(path.read_text()) == []


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # The CLI says "invalid enforcement level ''" for a misspelt policy name.
        (
            json.dumps({**PROD, "hourly-burn-limt": {"max_hourly_usd": 1}}),
            ["hourly-burn-limt:", "'hourly-burn-limit'"],
        ),
        # ... "invalid character 'h' looking for beginning of value" for YAML.
        ("hourly-burn-limit:\n  max_hourly_usd: 280\n", ["is YAML, not JSON", "rewrite it as JSON"]),
        # ... "cannot unmarshal number 1e309" for a number that overflows.
        ('{"hourly-burn-limit": {"max_hourly_usd": 1e309}}', ["hourly-burn-limit.max_hourly_usd:", "finite"]),
        ('{"hourly-burn-limit": {"max_hourly_usd": NaN}}', ["not valid JSON", "NaN is not JSON"]),
        (
            '{"hourly-burn-limit": {"max_hourly_usd": -5}}',
            ["hourly-burn-limit.max_hourly_usd:", "fix the value"],
        ),
        ('{"run-cost-limit": {"max_run_usd": 1, "typo": 2}}', ["run-cost-limit.typo:", "fix the spelling"]),
        (
            '{"run-cost-limit": {"max_run_ust": 1}}',
            ["run-cost-limit.max_run_ust:", "did you mean 'max_run_usd'?"],
        ),
        (
            '{"run-cost-limit": {"enforcementLevel": "warn"}}',
            ["run-cost-limit.enforcementLevel:", "advisory"],
        ),
        ('{"run-cost-limit": "off"}', ["run-cost-limit:", "use one of advisory"]),
        ('{"run-cost-limit": 3}', ["run-cost-limit: is not an object"]),
        ("[1, 2]", ["(file): is not a JSON object"]),
        ('{"a": ', ["(file): is not valid JSON at line 1"]),
    ],
)
def test_each_problem_names_key_and_fix(text: str, words: list[str]) -> None:
    problems = problems_in(text)
    assert problems and all(any(w in p for p in problems) for w in words), problems


def test_levels_and_shorthand_are_accepted() -> None:
    text = json.dumps({"spot-share-limit": "advisory", "min-cuda-version": {"enforcementLevel": "disabled"}})
    assert problems_in(text) == []
    budget = json.dumps({"run-cost-limit": "advisory", "hourly-burn-limit": {"enforcementLevel": "disabled"}})
    assert problems_in(budget, allow_unenforced_budget=True) == []


# Issue #34, class 2: a budget switched off by accident. (file text, words of a problem)
UNENFORCED = [
    ('{"hourly-burn-limit": "disabled"}', "hourly-burn-limit: 'disabled' turns off a budget policy"),
    ('{"run-cost-limit": {"enforcementLevel": "advisory"}}', "run-cost-limit.enforcementLevel: 'advisory'"),
    ('{"runpod-spend-limit": "disabled"}', "--allow-unenforced-budget"),
    ('{"storage-cost-limit": "advisory"}', "TRAINSTACK_ALLOW_UNENFORCED_BUDGET=1"),
    ('{"run-cost-within-budget": {"enforcementLevel": "disabled"}}', "turns off a budget policy"),
    (
        '{"hourly-burn-limit": {"max_hourly_usd": 40}, "hourly-burn-limit": "disabled"}',
        "hourly-burn-limit: is given twice",
    ),
    (
        '{"hourly-burn-limit": {"max_hourly_usd": 40, "max_hourly_usd": 4000}}',
        "hourly-burn-limit.max_hourly_usd: is given twice",
    ),
    ('{"run-cost-limit": {"enforcementLevel": "mandatory", "enforcementLevel": "disabled"}}', "given twice"),
]


@pytest.mark.parametrize(("text", "words"), UNENFORCED)
def test_a_budget_turned_off_or_a_key_given_twice_is_refused(text: str, words: str) -> None:
    problems = problems_in(text)
    assert any(words in p for p in problems), problems


def test_the_override_is_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    off = tmp_path / "off.json"
    off.write_text('{"hourly-burn-limit": "disabled"}')
    monkeypatch.delenv("TRAINSTACK_ALLOW_UNENFORCED_BUDGET", raising=False)
    assert main([str(off)]) == 2
    assert main(["--allow-unenforced-budget", str(off)]) == 0
    monkeypatch.setenv("TRAINSTACK_ALLOW_UNENFORCED_BUDGET", "1")
    assert main([str(off)]) == 0
    twice = tmp_path / "twice.json"
    twice.write_text('{"hourly-burn-limit": {"max_hourly_usd": 1, "max_hourly_usd": 2}}')
    assert main(["--allow-unenforced-budget", str(twice)]) == 2  # no override makes a lost key right


def test_cli_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "prod.json"
    bad.write_text('{"hourly-burn-limit": {"max_hourly_usd": 1e309}}')
    good = REPO / "policy/config/dev.json"
    assert main([str(good)]) == 0
    assert main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: hourly-burn-limit.max_hourly_usd:" in err
    # the shipped file says nothing: no problem, and no old run-cap key to give notice of (#33)
    assert not [line for line in err.splitlines() if line.startswith(str(good))], err


@pytest.mark.parametrize("stack", ["dev", "search", "prod", "local-cpu"])
def test_shipped_policy_configs_use_no_deprecated_cap_key(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's one cap lives in the stack file (trainstack:run.max_cost_usd), so every scripts/up of a
    shipped stack runs without a deprecation notice; the old keys stay readable for teams' own files."""
    path = REPO / f"policy/config/{stack}.json"
    assert deprecation_notices(path.read_text()) == []
    assert main([str(path)]) == 0 and capsys.readouterr().err == ""
    raw = yaml.safe_load((REPO / f"stacks/Pulumi.{stack}.yaml").read_text())["config"]
    assert (raw.get("trainstack:run") or {}).get("max_cost_usd", 0) > 0, f"{stack} sets no run cap"


def test_old_run_cap_keys_still_pass_with_a_notice_naming_the_one_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.json"
    old.write_text(
        '{"run-cost-limit": {"max_run_usd": 10}, "run-cost-within-budget": {"max_run_cost_usd": 5}}'
    )
    assert main([str(old)]) == 0
    err = capsys.readouterr().err
    assert err.count("trainstack:run.max_cost_usd") == 2
    assert "run-cost-limit.max_run_usd: deprecated" in err
    new = tmp_path / "new.json"
    new.write_text('{"run-cost-limit": {"default_run_hours": 8}}')
    assert main([str(new)]) == 0 and capsys.readouterr().err == ""
