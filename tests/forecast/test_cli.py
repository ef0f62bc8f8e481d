"""`scripts/forecast STACK [--set key=value ...]`: the breakdown from the stack file, and "what if"s."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from forecast.cli import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_OVER_CAP, apply_set, main
from harness.pulumi_cli import REPO


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    assert main([*argv, "--json"]) in (EXIT_FITS, EXIT_DOES_NOT_FIT, EXIT_OVER_CAP)
    return dict(json.loads(capsys.readouterr().out))


def test_the_real_entry_point_prints_the_prod_breakdown() -> None:
    proc = subprocess.run(
        [str(REPO / "scripts/forecast"), "prod"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == EXIT_FITS, proc.stderr
    out = proc.stdout
    for words in ("Memory per GPU", "optimizer state", "activations", "GPU memory (fits)", "headroom"):
        assert words in out
    for words in ("training FLOPs (model)", "MFU assumed", "hours on 64 GPUs, ideal", "restarts"):
        assert words in out
    assert "on-demand (compute + storage)" in out and "$255" in out


def test_what_if_half_the_gpus_doubles_the_hours(capsys: pytest.CaptureFixture[str]) -> None:
    base = as_json(capsys, "prod")
    half = as_json(capsys, "prod", "--set", "cluster.nodes=4")
    assert half["gpus_per_job"] == 32
    burn_in = 10 / 60  # prod's training.burn_in_min, once on new nodes: not a function of the GPUs
    # twice the hours, and a little more: each GPU's share of zero3's optimizer step doubles too
    ratio = (half["hours"] - burn_in) / (base["hours"] - burn_in)
    assert 2.0 < ratio < 2.01
    # zero3 shards the states over the job's GPUs: fewer GPUs, more memory each.
    assert half["memory_gb_per_gpu"]["total"] > base["memory_gb_per_gpu"]["total"]


def test_what_if_twice_the_tokens_doubles_the_run_cost(capsys: pytest.CaptureFixture[str]) -> None:
    base = as_json(capsys, "prod")
    double = as_json(capsys, "prod", "--set", "tokens=4.0e10")
    burn_in_usd = 10 / 60 * base["usd_per_hour"]  # prod's burn-in, once on new nodes: not per token
    assert double["run_cost_usd"] - burn_in_usd == pytest.approx(
        2 * (base["run_cost_usd"] - burn_in_usd), rel=1e-3
    )


def test_the_run_cap_is_shown_and_a_run_over_it_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod"]) == EXIT_FITS
    line = capsys.readouterr().out.strip().splitlines()[-1]
    # stacks/Pulumi.prod.yaml: trainstack:run.max_cost_usd = 10000, the run's one cap
    assert line.startswith("run cap: $10,000.00 (trainstack:run.max_cost_usd in stacks/Pulumi.prod.yaml)")
    assert "within it" in line
    assert main(["prod", "--set", "tokens=8e10"]) == EXIT_OVER_CAP  # 4 x the tokens: ~ $17k
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "OVER it by $" in last and "scripts/up refuses the run" in last
    assert as_json(capsys, "prod", "--set", "tokens=8e10")["max_run_cost_usd"] == 10000
    # --set moves the one cap like any key: the same run, under a raised cap
    assert main(["prod", "--set", "tokens=8e10", "--set", "run.max_cost_usd=20000"]) == EXIT_FITS


def test_a_stack_without_the_one_cap_is_held_to_its_policy_configs_old_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Backward compatible: a stack that sets no trainstack:run.max_cost_usd is held to the deprecated
    run-cost-within-budget.max_run_cost_usd of its policy config, as the policy pack holds it, else to the
    policy's default."""
    stacks, policies = tmp_path / "stacks", tmp_path / "policy"
    stacks.mkdir()
    policies.mkdir()
    doc = yaml.safe_load((REPO / "stacks/Pulumi.prod.yaml").read_text())
    del doc["config"]["trainstack:run"]
    (stacks / "Pulumi.team.yaml").write_text(yaml.safe_dump(doc))
    (policies / "team.json").write_text('{"run-cost-within-budget": {"max_run_cost_usd": 3500}}')
    argv = ["team", "--stacks-dir", str(stacks), "--policy-dir", str(policies)]
    assert main(argv) == EXIT_OVER_CAP  # ~ $3.9k against the old key's $3,500
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "run cap: $3,500.00 (run-cost-within-budget.max_run_cost_usd in " in last
    (policies / "team.json").write_text("{}")
    assert main(argv) == EXIT_FITS
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "run cap: $5,000.00 (the run-cost-within-budget policy's default)" in last


def test_where_both_caps_are_set_the_stricter_holds_as_in_the_policy_pack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #49 class 1: a policy config cap under the stack's one cap holds, and the line says so."""
    stacks, policies = tmp_path / "stacks", tmp_path / "policy"
    stacks.mkdir()
    policies.mkdir()
    (stacks / "Pulumi.team.yaml").write_text((REPO / "stacks/Pulumi.prod.yaml").read_text())  # cap $10,000
    (policies / "team.json").write_text('{"run-cost-within-budget": {"max_run_cost_usd": 3500}}')
    argv = ["team", "--stacks-dir", str(stacks), "--policy-dir", str(policies)]
    assert main(argv) == EXIT_OVER_CAP  # ~ $3.9k: within the stack's $10,000, over the file's $3,500
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "run cap: $3,500.00 (run-cost-within-budget.max_run_cost_usd in " in last
    assert (
        "the stricter of two caps: trainstack:run.max_cost_usd in stacks/Pulumi.team.yaml is $10,000" in last
    )
    (policies / "team.json").write_text('{"run-cost-within-budget": {"max_run_cost_usd": 20000}}')
    assert main(argv) == EXIT_FITS
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "run cap: $10,000.00 (trainstack:run.max_cost_usd in stacks/Pulumi.team.yaml, the stricter" in last


def test_a_change_that_does_not_fit_exits_1_with_the_fixes(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["dev", "--set", "sharding=ddp", "--set", "activation_checkpointing=false"]) == EXIT_DOES_NOT_FIT
    )
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out
    assert "Changes that make it fit, cheapest first:" in out
    assert "shard further: sharding zero" in out


def test_bad_values_are_refused_with_the_key_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prod", "--set", "attention_heads=30"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "trainstack:training.model.attention_heads" in err and "do not divide hidden_size 4096" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["prod", "--set", "nonsense"], "write key=value"),
        (["nosuchstack"], "no stack 'nosuchstack'"),
        (["prod", "--set", "cluster.gpu_type.x=1"], "is not a mapping"),
    ],
)
def test_usage_errors(capsys: pytest.CaptureFixture[str], argv: list[str], words: str) -> None:
    assert main(argv) == EXIT_BAD_INPUT
    assert words in capsys.readouterr().err


def test_a_stack_without_a_model_says_how_to_add_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["local-cpu"]) == EXIT_DOES_NOT_FIT
    assert "declares no trainstack:training.model" in capsys.readouterr().err


def test_set_paths() -> None:
    raw: dict[str, Any] = {"trainstack:cluster": {"nodes": 8}}
    assert apply_set(raw, "cluster.nodes=4")["trainstack:cluster"] == {"nodes": 4}
    assert apply_set(raw, "sharding=zero2")["trainstack:training"] == {"model": {"sharding": "zero2"}}
    assert (
        apply_set(raw, "trainstack:runpod_spend_limit_per_hour=300")["trainstack:runpod_spend_limit_per_hour"]
        == 300
    )
    assert raw == {"trainstack:cluster": {"nodes": 8}}  # the input is not changed


# Issue #34, classes 3 and 4 through the real entry point: numbers that killed the forecast with a traceback
# and strings that rich read as markup. Each: (--set, exit status, words on stderr or stdout).
HOSTILE_SETS = [
    ("mfu=4.4e-309", EXIT_BAD_INPUT, "trainstack:training.model.mfu: must be at least 0.01"),
    ("parameters=true", EXIT_BAD_INPUT, "trainstack:training.model.parameters: is true, a boolean"),
    ("layers=true", EXIT_BAD_INPUT, "trainstack:training.model.layers"),
    ("hidden_size=" + "9" * 401, EXIT_BAD_INPUT, "got a 401-digit number"),
    ("parameters=1e200", EXIT_BAD_INPUT, "at most 1e+13, got 1e+200"),
    ("tokens=1e200", EXIT_BAD_INPUT, "trainstack:training.model.tokens"),
    ("mfu=1.0", EXIT_BAD_INPUT, "above the best published 0.552"),
    ("mfu=.nan", EXIT_BAD_INPUT, "trainstack:training.model.mfu"),
    ("cluster.nodes=" + "9" * 401, EXIT_BAD_INPUT, "trainstack:cluster.nodes"),
    ("cluster.gpus_per_node=" + "9" * 30, EXIT_BAD_INPUT, "trainstack:cluster.gpus_per_node"),
    ("runpod_spend_limit_per_hour=true", EXIT_BAD_INPUT, "trainstack:runpod_spend_limit_per_hour"),
    ("training.min_free_disk_gb=" + "9" * 30, EXIT_BAD_INPUT, "trainstack:training.min_free_disk_gb"),
    ("tokens=2.0e7 #[/bold]", EXIT_FITS, "tokens=2.0e7 #[/bold]"),
    ("tokens=2.0e7 #[link=https://evil.example]x[/link]", EXIT_FITS, "[link=https://evil.example]"),
]


@pytest.mark.parametrize(
    ("assignment", "status", "words"), HOSTILE_SETS, ids=[r[0][:40] for r in HOSTILE_SETS]
)
def test_hostile_sets_are_refused_with_the_key_path_or_shown_as_text(
    assignment: str, status: int, words: str
) -> None:
    proc = subprocess.run(
        [str(REPO / "scripts/forecast"), "search", "--set", assignment],
        capture_output=True, text=True, timeout=60, check=False,
        env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == status, proc.stderr
    assert "Traceback" not in proc.stderr
    assert words in proc.stdout + proc.stderr
    assert "\x1b]8;" not in proc.stdout  # no terminal hyperlink


def _script(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "scripts/forecast"), *argv], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("given", "meant"),
    [("shardng", "training.model.sharding"), ("token", "training.model.tokens"), ("nodes", "cluster.nodes")],
)
def test_a_misspelt_or_bare_set_key_gets_a_did_you_mean(given: str, meant: str) -> None:
    proc = _script("dev", "--set", f"{given}=2")
    assert proc.returncode == EXIT_BAD_INPUT
    assert f"did you mean trainstack:{meant}?" in proc.stderr, proc.stderr


def test_sizes_with_suffixes_and_a_parameter_count_the_shapes_contradict() -> None:
    words = _script("dev", "--set", "tokens=20M", "--set", "parameters=8.03B", "--json")
    assert words.returncode == EXIT_FITS, words.stderr
    assert json.loads(words.stdout)["run_cost_usd"] == pytest.approx(
        as_dict(_script("dev", "--json"))["run_cost_usd"]
    )
    assert "warning" not in words.stderr
    wrong = _script("prod", "--set", "parameters=70e9")
    assert "parameters is 7e+10, but the shapes (layers 32 x hidden_size 4096" in wrong.stderr, wrong.stderr


def as_dict(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return dict(json.loads(proc.stdout))


def test_explain_prints_the_steps_parts_and_the_assumed_shapes(capsys: pytest.CaptureFixture[str]) -> None:
    from forecast.cli import EXIT_FITS, main

    assert main(["prod", "--explain"]) == EXIT_FITS
    out = capsys.readouterr().out
    parts = ("matmul", "attention", "elementwise", "optimizer step", "recompute", "communication (zero3)")
    assert all(words in out for words in parts)
    assert "memory peak" in out and "end of forward (activations)" in out
    assert "assumed: kv_heads 8" in out and "assumed: ffn_hidden_size 14336" in out
    main(["prod", "--set", "kv_heads=8", "--set", "ffn_hidden_size=14336"])
    assert "assumed:" not in capsys.readouterr().out


@pytest.mark.parametrize("stack", ["dev", "search", "prod"])
@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("activation_checkpointing=false",),
        ("method=lora", "trainable_fraction=0.005"),
        ("method=lora", "trainable_fraction=0.005", "activation_checkpointing=false"),
        ("precision=fp8",),
    ],
    ids=["full", "full-no-ckpt", "lora", "lora-no-ckpt", "fp8"],
)
def test_explain_shows_every_part_for_every_method_and_stack(
    capsys: pytest.CaptureFixture[str], stack: str, sets: tuple[str, ...]
) -> None:
    """`--explain` prints the step's parts and the memory's for each method on each shipped stack; fp8 says
    its matmul peak is assumed."""
    args = [stack, "--explain", *(x for kv in sets for x in ("--set", kv))]
    assert main(args) in (0, 1, 3)
    out = capsys.readouterr().out
    for words in (
        "matmul",
        "attention",
        "elementwise",
        "optimizer step",
        "recompute",
        "communication (zero3)",
    ):
        assert words in out, words
    for words in (
        "host beyond the GPU",
        "kernels launched",
        "memory peak",
        "weights",
        "activations",
        "gradients",
    ):
        assert words in out, words
    assert ("assumed: fp8 matmuls" in out) == ("precision=fp8" in sets)


@pytest.mark.parametrize(
    ("assignment", "words"),
    [
        ("kv_heads=3", "3 key-value heads do not divide attention_heads 32"),
        ("kv_heads=0", "key-value heads do not divide"),
        ("ffn_hidden_size=0", "give the MLP's inner width"),
    ],
)
def test_the_new_shape_keys_are_refused_with_their_fix(
    capsys: pytest.CaptureFixture[str], assignment: str, words: str
) -> None:
    from forecast.cli import EXIT_BAD_INPUT, main

    assert main(["dev", "--set", assignment]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert f"trainstack:training.model.{assignment.split('=')[0]}" in err and words in err


def test_a_shape_that_contradicts_the_parameter_count_is_refused_not_forecast(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue #62: `ffn_hidden_size=1` on prod halved the run forecast ($4,174 -> $2,028) without a word."""
    from forecast.cli import EXIT_BAD_INPUT, main

    assert main(["prod", "--set", "ffn_hidden_size=1"]) == EXIT_BAD_INPUT
    out = capsys.readouterr()
    assert "trainstack:training.model.ffn_hidden_size: 1 with layers 32" in out.err
    assert "beyond the 10% the forecast allows" in out.err and "run cap" not in out.out
