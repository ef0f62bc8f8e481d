"""The what-if answers (issue #68): the forecast is always shown, then what the stack's rules say of it; model
presets are one flag; a short key path is completed and a wrong one gets the closest real key; a parameter
count alone does not invent an FFN width; a fix names the GPU or the nodes that fit. In-process calls of
forecast/cli.py's main: no subprocess."""

from __future__ import annotations

import json

import pytest

from forecast.cli import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS, EXIT_OVER_CAP, main
from forecast.keys import KeyError_, resolve
from forecast.presets import PRESETS, UnknownPreset, apply_preset, preset
from forecast.shapes import ffn_width
from forecast.stack import forecast_input
from stackconfig import files
from stackconfig.loader import load_stack_config


def test_a_node_count_over_the_spend_limit_still_prints_the_forecast_then_the_refusal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # forecast's own --help example: on dev (a pod stack) 4 nodes are 4 jobs at $127.71/h, above the $80/h
    # account limit. It printed only the refusal; now the forecast, then the refusal, and exit 3.
    code = main(["dev", "--set", "cluster.nodes=4"])
    out = capsys.readouterr()
    assert code == EXIT_OVER_CAP
    assert "4 job(s) x 8 GPUs" in out.out and "Money" in out.out
    assert out.out.index("run cap:") < out.out.index("the stack's rules refuse it (1;")
    assert "trainstack:runpod_spend_limit_per_hour" in out.out and "$80/h" in out.out


def test_the_refusal_is_in_the_json_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["dev", "--set", "cluster.nodes=4", "--json"]) == EXIT_OVER_CAP
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is True and data["run_cost_usd"] > 0
    assert [r.split(":", 2)[1] for r in data["refused_by"]] == ["runpod_spend_limit_per_hour"]


def test_a_short_key_path_is_completed_and_a_wrong_one_gets_the_closest_real_key() -> None:
    assert resolve("model.parameters") == ["training", "model", "parameters"]
    assert resolve("trainstack:cluster.nodes") == ["cluster", "nodes"]
    with pytest.raises(KeyError_, match=r"did you mean trainstack:cluster\.nodes\?"):
        resolve("cluster.node")
    with pytest.raises(KeyError_, match=r"did you mean trainstack:training\.model\.parameters\?"):
        resolve("model.paramters")


def test_set_model_parameters_with_a_preset_is_the_70b_forecast(capsys: pytest.CaptureFixture[str]) -> None:
    # `--set model.parameters=70e9` was "did you mean trainstack:cluster.nodes?"; with the 70B's shapes it is
    # the 70B forecast, and the preset alone gives the same.
    assert main(["dev", "--model", "llama-3-70b", "--set", "model.parameters=70.6e9", "--json"]) in (
        EXIT_FITS,
        EXIT_DOES_NOT_FIT,
    )
    by_key = json.loads(capsys.readouterr().out)
    main(["dev", "--model", "llama-3-70b", "--json"])
    assert json.loads(capsys.readouterr().out)["memory_gb_per_gpu"] == by_key["memory_gb_per_gpu"]


def test_a_parameter_count_alone_does_not_invent_the_ffn_width(capsys: pytest.CaptureFixture[str]) -> None:
    # Llama-3-8B's shapes with 70e9 parameters left an FFN of 172032 (42 x the hidden size), used silently.
    assert main(["dev", "--set", "model.parameters=70e9"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert "FFN width of 172032" in err and "--model llama-3-70b" in err


def test_presets_give_the_published_shapes_and_leave_the_runs_own_keys() -> None:
    raw = apply_preset(files.read_config("dev"), "Llama-3-70B")
    model = load_stack_config(raw).training.model
    assert model is not None
    assert (model.layers, model.hidden_size, model.attention_heads, model.kv_heads) == (80, 8192, 64, 8)
    assert (model.ffn_hidden_size, model.vocab_size) == (28672, 128256)
    assert model.tokens == 2e7 and model.sequence_length == 4096  # dev's own run
    with pytest.raises(UnknownPreset, match="did you mean llama-3-70b"):
        preset("lama-3-70b")
    assert preset("llama-3.1-8b") == PRESETS["llama-3-8b"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_presets_shapes_hold_its_parameter_count(name: str) -> None:
    """The block's projections and the embeddings add up to the stated count within 1 %: a mistyped shape
    or count shows here (norms and biases are the rest)."""
    p = PRESETS[name]
    assert p.source.startswith("https://huggingface.co/")
    head = p.hidden_size // p.attention_heads
    block = (
        2 * p.hidden_size**2 + 2 * p.hidden_size * p.kv_heads * head + 3 * p.hidden_size * p.ffn_hidden_size
    )
    total = p.layers * block + 2 * p.vocab_size * p.hidden_size
    assert total == pytest.approx(p.parameters, rel=0.01)


def test_a_fix_names_the_gpu_and_the_nodes_that_fit() -> None:
    config = load_stack_config(apply_preset(files.read_config("dev"), "llama-3-70b"))
    result = forecast_input(config)
    assert result is not None and ffn_width(result.workload) == 28672
    from forecast.stack import stack_forecast

    fc = stack_forecast(config)
    assert fc is not None and not fc.memory.fits
    more = next(f for f in fc.fixes if f.startswith("more GPUs"))
    assert "3 nodes of 8 (topology cluster, cluster.nodes 3)" in more
    larger = next(f for f in fc.fixes if f.startswith("a larger GPU"))
    assert "cluster.gpu_type B200" in larger


def test_the_one_exit_code_table_has_forecasts_1_and_3() -> None:
    rows = {
        line.split("|")[1].strip(): line
        for line in (files.REPO / "docs/CLI.md").read_text().splitlines()
        if line.startswith("| ") and line.split("|")[1].strip().isdigit()
    }
    assert "`forecast`: the model does not fit" in rows["1"]
    assert "`forecast`: it fits, but `scripts/up` would refuse it" in rows["3"]
    assert rows["3"].rstrip(" |").endswith("`forecast`")
