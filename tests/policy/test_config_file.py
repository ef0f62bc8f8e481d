"""Policy config files are checked by our scripts before the CLI reads them: file, key and fix named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.config_file import CONFIG_MODELS, main, problems_in
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
    text = json.dumps({"run-cost-limit": "advisory", "hourly-burn-limit": {"enforcementLevel": "disabled"}})
    assert problems_in(text) == []


def test_cli_names_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "prod.json"
    bad.write_text('{"hourly-burn-limit": {"max_hourly_usd": 1e309}}')
    good = REPO / "policy/config/dev.json"
    assert main([str(good)]) == 0
    assert main([str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: hourly-burn-limit.max_hourly_usd:" in err and str(good) not in err
