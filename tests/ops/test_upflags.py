"""`scripts/up`'s pulumi flags read as Pulumi's CLI (cobra's pflag) reads them: no spelling of --skip-preview,
and no policy pack, config, stack or template of the user's, gets through (issue #62)."""

from __future__ import annotations

import pytest

from ops.upflags import Given, parse, refusal

SKIPS = [
    "--skip-preview", "-f", "--skip-preview=true", "--skip-preview=1", "--skip-preview=false", "-f=true",
    "-f=1", "-rf", "-yf", "-fy", "-drf", "-jf",
]  # fmt: skip


@pytest.mark.parametrize("spelling", SKIPS)
def test_every_spelling_of_skip_preview_is_refused_naming_it(spelling: str) -> None:
    said = refusal(["--yes", spelling])
    assert said is not None and said.startswith(f"refusing {spelling}")
    assert "budget checks would run only after the pods exist" in said


@pytest.mark.parametrize(
    "args",
    [
        ["--policy-pack", "/tmp/lax"], ["--policy-pack=/tmp/lax"], ["--policy-pack-config", "lax.json"],
        ["--policy-pack-config=lax.json"], ["--diff", "--policy-pack", "policy", "--policy-pack-config", "x"],
    ],
)  # fmt: skip
def test_a_second_policy_pack_or_config_is_refused(args: list[str]) -> None:
    said = refusal(args)
    assert said is not None and "--policy-pack" in said and "policy/config/<stack>.json and no other" in said


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-s", "prod"], "refusing -s: scripts/up chooses the stack"),
        (["--stack=prod"], "refusing --stack=prod"),
        (["-C", "/tmp"], "refusing -C"),
        (["--config-file", "lax.yaml"], "refusing --config-file"),
        (["-c", "trainstack:run.max_cost_usd=1e9"], "refusing -c"),
        (["-dc", "trainstack:run.max_cost_usd=1e9"], "refusing -dc (-c, --config)"),
        (["https://example.com/template"], "would deploy it as a template"),
        (["--", "-f"], "refusing '-f': pulumi up would deploy it"),
        (["--no-such-flag"], "refusing --no-such-flag: pulumi up has no flag --no-such-flag"),
        (["-Xf"], "refusing -Xf: pulumi up has no flag -X"),
        (["--target"], "refusing --target: it needs a value"),
        (["---skip-preview"], "not a flag"),
    ],
)
def test_other_stacks_templates_and_unknown_flags_are_refused(args: list[str], words: str) -> None:
    said = refusal(args)
    assert said is not None and words in said, said


@pytest.mark.parametrize(
    "args",
    [
        [], ["--yes"], ["-y", "--diff"], ["-r"], ["--refresh"], ["--refresh=false"], ["-m", "-f"],
        ["--message", "--skip-preview"], ["-pf"], ["--target", "-f", "-t=-f"], ["-v=3", "-rd"],
        ["--color", "never", "--parallel", "8", "--suppress-permalink"], ["--target-dependents", "-t", "urn"],
    ],
)  # fmt: skip
def test_what_pulumi_reads_as_values_or_other_flags_passes(args: list[str]) -> None:
    """A flag that needs a value takes the next argument whatever it looks like, as pflag does."""
    assert refusal(args) is None


def test_the_parse_is_pflags() -> None:
    assert parse(["-rf", "-pf", "-m", "-f", "--refresh", "x"]) == [
        Given("refresh", "-rf", None),
        Given("skip-preview", "-rf", None),
        Given("parallel", "-pf", "f"),
        Given("message", "-m", "-f"),
        Given("refresh", "--refresh", None),  # takes a value only after `=`: x is positional
        Given("", "x", "x"),
    ]
