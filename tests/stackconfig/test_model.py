"""`trainstack:training.model`: valid sections parse; every bad one is refused naming its key path and fix."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from facts.gpus import GPUS
from stackconfig.config import ConfigError
from stackconfig.loader import load_stack_config
from stackconfig.rules import model_problems

MODEL: dict[str, Any] = {
    "parameters": "7e9",  # Pulumi hands YAML numbers over as JSON; strings like this must parse too
    "tokens": 5.0e8,
    "sharding": "zero3",
    "layers": 32,
    "hidden_size": 4096,
    "attention_heads": 32,
    "sequence_length": 4096,
}
BASE: dict[str, Any] = {
    "trainstack:cluster": {"gpu_type": "H100_SXM", "nodes": 1, "gpus_per_node": 8},
    "trainstack:training": {"model": MODEL},
}


def _with(**changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw["trainstack:training"]["model"].update(changes)
    return raw


def test_a_model_section_parses_with_its_defaults() -> None:
    model = load_stack_config(BASE).training.model
    assert model is not None
    assert model.parameters == 7e9
    assert (model.method, model.precision, model.optimizer) == ("full", "bf16", "adamw")
    assert (model.micro_batch_per_gpu, model.mfu, model.overhead) == (1, None, 0.3)


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("8B", 8e9),
        ("20M", 2e7),
        ("2e7", 2e7),
        ("2.0e10", 2e10),
        ("1.5T", 1.5e12),
        ("500k", 5e5),
        (8.03e9, 8.03e9),
    ],
)
def test_sizes_are_read_as_people_write_them(written: object, value: float) -> None:
    tiny = {"layers": 1, "hidden_size": 64, "attention_heads": 8, "vocab_size": 256}  # shapes 500k can hold
    model = load_stack_config(_with(parameters=written, tokens=written, **tiny)).training.model
    assert model is not None and (model.parameters, model.tokens) == (value, value)


def test_a_parameter_count_the_shapes_contradict_is_named_with_both() -> None:
    from stackconfig.model import parameter_notice

    llama = {"layers": 32, "hidden_size": 4096, "vocab_size": 128256, "attention_heads": 32}
    ok = load_stack_config(_with(parameters="8.03B", **llama)).training.model
    assert ok is not None and parameter_notice(ok) is None  # Llama-3-8B: 7.49e9 from the shapes, 7 % off
    wrong = load_stack_config(_with(parameters="70B", **llama)).training.model
    assert wrong is not None
    notice = parameter_notice(wrong)
    assert notice is not None and "parameters is 7e+10" in notice and "imply about 7.49e+09" in notice
    assert "layers 32 x hidden_size 4096" in notice


def test_the_section_is_optional() -> None:
    raw = copy.deepcopy(BASE)
    del raw["trainstack:training"]["model"]
    assert load_stack_config(raw).training.model is None


# (case id, raw config, key path, words of the message and its fix)
INVALID = [
    ("zero-parameters", _with(parameters=0), "parameters", "must be at least 1"),
    ("negative-tokens", _with(tokens=-1e9), "tokens", "must be at least 1"),
    ("zero-layers", _with(layers=0), "layers", "give the model's transformer layers"),
    ("zero-micro-batch", _with(micro_batch_per_gpu=0), "micro_batch_per_gpu", "must be at least 1"),
    ("zero-heads", _with(attention_heads=0), "attention_heads", "give the model's attention heads"),
    ("heads-not-dividing", _with(attention_heads=30), "attention_heads", "do not divide hidden_size 4096"),
    ("unknown-precision", _with(precision="fp16"), "precision", "use one of the values listed"),
    ("unknown-sharding", _with(sharding="fsdp"), "sharding", "'zero3'"),
    ("lora-no-fraction", _with(method="lora"), "trainable_fraction", "method lora needs"),
    ("fraction-on-full", _with(trainable_fraction=0.01), "trainable_fraction", "set method: lora"),
    (
        "fraction-too-big",
        _with(method="lora", trainable_fraction=1.5),
        "trainable_fraction",
        "between 0 and 1",
    ),
    ("mfu-over-1", _with(mfu=40), "mfu", "at most 1"),
    ("negative-overhead", _with(overhead=-0.1), "overhead", "at least 0 and at most 5"),
    # Issue #34, class 4: booleans are not numbers; every number finite and in its stated range.
    ("parameters-true", _with(parameters=True), "parameters", "a boolean; write a number"),
    ("layers-true", _with(layers=True), "layers", "write a whole number"),
    ("tokens-false", _with(tokens=False), "tokens", "a boolean; write a number"),
    ("mfu-true", _with(mfu=True), "mfu", "a boolean; write a number"),
    ("parameters-1e200", _with(parameters=1e200), "parameters", "at most 1e+13, got 1e+200"),
    ("tokens-1e200", _with(tokens=1e200), "tokens", "at most 1e+15"),
    ("hidden-401-digits", _with(hidden_size=int("9" * 401)), "hidden_size", "got a 401-digit number"),
    ("layers-401-digits", _with(layers=int("9" * 401)), "layers", "got a 401-digit number"),
    ("parameters-401-digits", _with(parameters=int("9" * 401)), "parameters", "write a number"),
    ("mfu-subnormal", _with(mfu=4.4e-309), "mfu", "at least 0.01"),
    ("mfu-above-published", _with(mfu=1.0), "mfu", "above the best published 0.552"),
    ("mfu-text", _with(mfu="fast"), "mfu", "write a number"),
    ("overhead-nan", _with(overhead=float("nan")), "overhead", "finite"),
    ("sequence-huge", _with(sequence_length=10**9), "sequence_length", "at most 4.19"),
    ("heads-float", _with(attention_heads=32.5), "attention_heads", "whole number"),
    ("misspelt-key", _with(hidden=4096), "hidden", "did you mean trainstack:training.model.hidden_size?"),
    (
        "misspelt-sharding",
        _with(shardng="zero3"),
        "shardng",
        "did you mean trainstack:training.model.sharding?",
    ),
    ("size-in-words", _with(tokens="lots"), "tokens", "or one with a suffix (8B, 20M, 1.5T, 500k)"),
    ("size-bad-suffix", _with(parameters="8X"), "parameters", "'8X' is not a size"),
]


def test_an_mfu_above_the_published_best_needs_the_override() -> None:
    model = load_stack_config(_with(mfu=0.7, mfu_beyond_published=True)).training.model
    assert model is not None and model.mfu == 0.7
    assert load_stack_config(_with(mfu="0.45")).training.model.mfu == 0.45  # type: ignore[union-attr]


@pytest.mark.parametrize(("raw", "key", "words"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_bad_model_is_refused_with_key_path_and_fix(raw: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_stack_config(raw)
    path = f"trainstack:training.model.{key}"
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching, f"no problem at {path}: {caught.value}"
    assert words in matching[0].message


def test_fp8_on_a_gpu_without_fp8_is_refused() -> None:
    """No GPU in today's table lacks FP8: the rule is checked against a copy of the H100 row without it."""
    config = load_stack_config(_with(precision="fp8"))
    no_fp8 = {"H100_SXM": replace(GPUS["H100_SXM"], peak_tflops_fp8=None)}
    ((path, message),) = model_problems(config, no_fp8)
    assert path == "training.model.precision"
    assert "has no fp8 tensor cores" in message
    assert message.endswith("use precision bf16, or a GPU type with FP8 (H100)")
    assert model_problems(config) == []  # the real H100 SXM row has FP8


# Issue #62: shapes copied from published config.json files agree with their parameter counts within the
# stated tolerance, whether the count is written exactly or round (7B, 8B) and embeddings tied or not.
PUBLISHED = {
    "llama-3-8b": dict(parameters="8.03B", layers=32, hidden_size=4096, attention_heads=32, kv_heads=8,
                       ffn_hidden_size=14336, vocab_size=128256),
    "llama-3-8b-as-8B": dict(parameters="8B", layers=32, hidden_size=4096, attention_heads=32, kv_heads=8,
                             ffn_hidden_size=14336, vocab_size=128256),
    "llama-2-7b-as-7B": dict(parameters="7B", layers=32, hidden_size=4096, attention_heads=32, kv_heads=32,
                             ffn_hidden_size=11008, vocab_size=32000),
    "llama-3.2-1b-tied": dict(parameters="1.24B", layers=16, hidden_size=2048, attention_heads=32, kv_heads=8,
                              ffn_hidden_size=8192, vocab_size=128256),
    "qwen2-7b": dict(parameters="7.62B", layers=28, hidden_size=3584, attention_heads=28, kv_heads=4,
                     ffn_hidden_size=18944, vocab_size=152064),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_shapes_agree_with_their_parameter_count(name: str) -> None:
    model = load_stack_config(_with(**PUBLISHED[name])).training.model
    assert model is not None and model.ffn_hidden_size is not None


SHAPES_CONTRADICT = [
    # ffn_hidden_size 1 on Llama-3-8B: 2.4e9 from the shapes, and the forecast's hours halved without a word
    ("ffn-1", dict(PUBLISHED["llama-3-8b"], ffn_hidden_size=1), "ffn_hidden_size", "makes 2.39e+09 param"),
    ("ffn-too-wide", dict(PUBLISHED["llama-3-8b"], ffn_hidden_size=28672), "ffn_hidden_size", "x that"),
    ("layers-doubled", dict(PUBLISHED["llama-3-8b"], layers=64), "ffn_hidden_size", "layers 64"),
    ("vocab-wrong", dict(PUBLISHED["llama-3-8b"], vocab_size=10**6), "ffn_hidden_size", "vocab_size 1000000"),
    ("hidden-doubled", dict(MODEL, hidden_size=16384, attention_heads=128), "parameters", "need at least"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "key", "words"), [c[1:] for c in SHAPES_CONTRADICT], ids=[c[0] for c in SHAPES_CONTRADICT]
)
def test_shapes_that_contradict_the_parameter_count_are_refused_with_the_fix(
    changes: dict[str, Any], key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_stack_config(_with(**changes))
    (problem,) = [p for p in caught.value.problems if p.path == f"trainstack:training.model.{key}"]
    assert words in problem.message and "config.json" in problem.message, problem.message
