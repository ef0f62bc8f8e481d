"""The forecast against LoRA and full fine-tunes measured on one H200 (docs/journal/2026-12-01-gpu.md,
"LoRA on H200").

The runs (bench/gpu_lora.py, 2026-12-01) are read from their own records: the runs the corrections were
drawn from (docs/gpu-validation/2026-12-01-h200-lora/lora.json) and a validation set run after them on
shapes they were not drawn from (…-lora-validation/lora.json: longer sequences, ranks 8 and 32, larger
batches, two runs near 141 GB). All: Hugging Face Llama shapes built at random, trained on
random tokens, s = 2048, bf16 autocast, SDPA, fused AdamW; LoRA on all seven projections of a bf16 frozen
base (peft), full fine-tunes with fp32 master weights. Measured peak memory is what the GPU gave the
process's tensors at their peak: max_memory_allocated plus the CUDA context (mem_get_info's used less
reserved; issue #44: the allocator's cache beyond it is freed before an out-of-memory error, so it is not
counted; it was max_memory_reserved before).

- every LoRA run's tokens/s and peak memory within 15 % of the forecast (issue #32's bar);
- every measured peak inside the forecast's band (docs/FORECAST.md, "Uncertainty band");
- no run whose measured peak exceeds a GPU of the table reads "fits" on that GPU (one validation run, 7B
  LoRA without checkpointing at micro-batch 8, peaked at 145.1 GB: over the H200's 141).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from facts.gpus import GPUS, gpu_spec
from forecast import Forecast, Hardware, forecast
from forecast.stack import hardware
from tests.forecast.factories import SEVEN_B, deployment, inp

RECORDS = Path(__file__).resolve().parents[2] / "docs/gpu-validation"
FITTED: list[dict[str, Any]] = json.loads((RECORDS / "2026-12-01-h200-lora/lora.json").read_text())["runs"]
VALIDATION: list[dict[str, Any]] = json.loads(
    (RECORDS / "2026-12-01-h200-lora-validation/lora.json").read_text()
)["runs"]
# The third call: the 8B frozen base and its controls (bench/gpu_lora8b.py); its profiled repeats (timed
# under torch.profiler) are left out.
EIGHT_B: list[dict[str, Any]] = [
    r
    for r in json.loads((RECORDS / "2026-12-01-h200-lora8b/lora.json").read_text())["runs"]
    if not r.get("profiled")
]
RUNS = FITTED + VALIDATION + EIGHT_B
# hidden, layers, heads, vocabulary, key-value heads, FFN of each shape (bench/gpu_lora.py's table S)
SHAPES = {
    "1b": (2048, 16, 32, 128256, 8, 8192),
    "3b": (3072, 28, 24, 128256, 8, 8192),
    "7b": (4096, 32, 32, 32000, 32, 11008),
    "8b": (4096, 32, 32, 128256, 8, 14336),
    "8b-kv32": (4096, 32, 32, 128256, 32, 14336),
    "8b-ffn11008": (4096, 32, 32, 128256, 8, 11008),
    "8b-v32000": (4096, 32, 32, 32000, 8, 14336),
}
TRAINED = [r for r in RUNS if r["mode"] != "frozen"]  # "frozen": no adapters, a reference for the base
LORA = [r for r in TRAINED if r["mode"] == "lora"]


def _id(run: dict[str, Any]) -> str:
    rank = f"-r{run['rank']}" if run["mode"] == "lora" else ""
    return f"{run['shape']}-{run['mode']}{rank}-{'ckpt' if run['ckpt'] else 'nockpt'}-b{run['b']}"


def _forecast(run: dict[str, Any], gpu: Hardware | None = None) -> Forecast:
    h, layers, heads, vocab, kv, ffn = SHAPES[run["shape"]]
    lora = run["mode"] == "lora"
    workload = SEVEN_B._replace(
        parameters=float(run["params"]),
        tokens=1e9,
        method="lora" if lora else "full",
        trainable_fraction=run["trainable"] / run["params"] if lora else 1.0,
        layers=layers,
        hidden_size=h,
        attention_heads=heads,
        vocab_size=vocab,
        sequence_length=run["s"],
        micro_batch_per_gpu=run["b"],
        activation_checkpointing=bool(run["ckpt"]),
        kv_heads=kv,
        ffn_hidden_size=ffn,
    )
    return forecast(inp(workload, deployment(gpu or hardware(gpu_spec("H200_SXM")), gpus=1)))


def _peak_gb(run: dict[str, Any]) -> float:
    return float(run["alloc"] + run["context"]) / 1e9


def test_the_records_hold_the_runs_the_docs_describe() -> None:
    assert (len(FITTED), len(VALIDATION), len(EIGHT_B), len(LORA), len(TRAINED)) == (15, 8, 17, 21, 27)
    assert all("oom" not in r and "error" not in r for r in RUNS)


@pytest.mark.parametrize("run", LORA, ids=_id)
def test_lora_throughput_within_15_percent(run: dict[str, Any]) -> None:
    ratio = run["tok_s"] / _forecast(run).compute.tokens_per_gpu_second
    assert 0.85 <= ratio <= 1.15, f"{_id(run)}: measured / forecast tokens/s {ratio:.2f}"


@pytest.mark.parametrize("run", LORA, ids=_id)
def test_lora_peak_memory_within_15_percent(run: dict[str, Any]) -> None:
    ratio = _peak_gb(run) / _forecast(run).memory.total
    assert 0.85 <= ratio <= 1.15, f"{_id(run)}: measured / forecast peak memory {ratio:.2f}"


@pytest.mark.parametrize("run", TRAINED, ids=_id)
def test_every_measured_peak_lies_inside_the_band(run: dict[str, Any]) -> None:
    mem = _forecast(run).memory
    assert mem.total_low <= _peak_gb(run) <= mem.total_high, (
        f"{_id(run)}: measured {_peak_gb(run):.1f} GB outside {mem.total_low:.1f}-{mem.total_high:.1f}"
    )


@pytest.mark.parametrize("key", sorted(GPUS))
def test_no_run_that_overflows_a_gpu_reads_fits_on_it(key: str) -> None:
    """Each run's measured peak against each GPU of the table: over its memory, never "fits"."""
    gpu = hardware(gpu_spec(key))
    overflowing = [r for r in TRAINED if _peak_gb(r) > gpu.memory_gb]
    for run in overflowing:
        assert _forecast(run, gpu).memory.verdict != "fits", f"{_id(run)} on {key}"
    if gpu.memory_gb < 100:
        assert overflowing  # 127.7 GB (7B LoRA) and 108.7 GB (7B full) are over the 80-94 GB GPUs


def test_scripts_forecast_dev_as_lora_lands_within_15_percent(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's check, through the CLI: the dev stack turned into the measured 7B LoRA run on one H200."""
    from forecast.cli import EXIT_FITS, main

    (run,) = [r for r in FITTED if _id(r) == "7b-lora-r16-ckpt-b4"]
    sets = {
        "method": "lora",
        "trainable_fraction": run["trainable"] / run["params"],
        "parameters": run["params"],
        "layers": 32,
        "hidden_size": 4096,
        "attention_heads": 32,
        "vocab_size": 32000,
        "sequence_length": 2048,
        "micro_batch_per_gpu": 4,
        "activation_checkpointing": "true",
        "sharding": "ddp",
        "cluster.gpu_type": "H200_SXM",
        "cluster.gpus_per_node": 1,
    }
    argv = ["dev", "--json"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    assert main(argv) == EXIT_FITS
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "fits" and out["gpu"] == "H200_SXM"
    assert 0.85 <= _peak_gb(run) / out["memory_gb_per_gpu"]["total"] <= 1.15
    # tokens/s per GPU = MFU x peak / model FLOPs per token ((4Ψ + 6Ψt), forecast/compute.py)
    tokens_per_gpu_second = out["mfu"] * 989.4e12 / (4 * run["params"] + 6 * run["trainable"])
    assert 0.85 <= run["tok_s"] / tokens_per_gpu_second <= 1.15


def _pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(LoRA at rank 16, frozen base) of the same shape, checkpointing and micro-batch, in the same call."""
    pairs = []
    for records in (FITTED, EIGHT_B):
        frozen = {(r["shape"], r["ckpt"], r["b"], r["s"]): r for r in records if r["mode"] == "frozen"}
        for r in records:
            key = (r["shape"], r["ckpt"], r["b"], r["s"])
            if r["mode"] == "lora" and r["rank"] == 16 and key in frozen:
                pairs.append((r, frozen[key]))
    return pairs


def test_the_adapter_terms_are_the_measured_lora_less_frozen_base_time() -> None:
    """ADAPTER_BYTES (forecast/compute.py) against each pair: LoRA's seconds per token less its frozen base's,
    as HBM bytes per token per element of adapted width at the H200's 4.8 TB/s; checkpointed and not."""
    from forecast.step import ADAPTER_BYTES, adapted_width

    pairs = _pairs()
    assert {(lora["shape"], lora["ckpt"]) for lora, _ in pairs} == {
        ("7b", 1),
        ("1b", 1),
        ("8b", 1),
        ("8b", 0),
        ("7b", 0),
    }
    for lora, frozen in pairs:
        workload = _forecast(lora).input.workload
        seconds = 1 / lora["tok_s"] - 1 / frozen["tok_s"]
        measured = seconds * 4.8e12 / (workload.layers * adapted_width(workload))
        expected = ADAPTER_BYTES[bool(lora["ckpt"])]
        assert abs(measured / expected - 1) <= 0.08, (
            f"{_id(lora)}: {measured:.1f} bytes, the forecast {expected}"
        )


def test_every_frozen_base_lands_on_the_step_model() -> None:
    """Frozen layers alone (LoRA's base with no adapters: trainable_fraction 0) are a case of the one step
    model (forecast/step.py), whose constants come from the 2026-12-03 sweep: none of these runs was in it."""
    frozen = [r for r in RUNS if r["mode"] == "frozen"]
    assert {r["shape"] for r in frozen} >= {"1b", "3b", "7b", "8b"}
    for run in frozen:
        rate = _forecast({**run, "mode": "lora", "trainable": 0}).compute.tokens_per_gpu_second
        ratio = run["tok_s"] / rate
        assert 0.95 <= ratio <= 1.15, f"{_id(run)}: measured / forecast tokens/s {ratio:.3f}"
