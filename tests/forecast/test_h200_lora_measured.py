"""The forecast against LoRA and full fine-tunes measured on one H200 (docs/GPU-VALIDATION.md, LoRA on H200).

The runs (bench/gpu_lora.py, 2026-12-01) are read from their own records: the runs the corrections were
drawn from (docs/gpu-validation/2026-12-01-h200-lora/lora.json) and a validation set run after them on
shapes they were not drawn from (…-lora-validation/lora.json: longer sequences, ranks 8 and 32, larger
batches, two runs near 141 GB). All: Hugging Face Llama shapes built at random, trained on
random tokens, s = 2048, bf16 autocast, SDPA, fused AdamW; LoRA on all seven projections of a bf16 frozen
base (peft), full fine-tunes with fp32 master weights. Measured peak memory is what the GPU gave the
process: the allocator's max_memory_reserved plus the CUDA context (mem_get_info's used less reserved).

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
# hidden, layers, heads, vocabulary of each shape (bench/gpu_lora.py's table S)
SHAPES = {
    "1b": (2048, 16, 32, 128256),
    "3b": (3072, 28, 24, 128256),
    "7b": (4096, 32, 32, 32000),
    "8b": (4096, 32, 32, 128256),
    "8b-kv32": (4096, 32, 32, 128256),
    "8b-ffn11008": (4096, 32, 32, 128256),
    "8b-v32000": (4096, 32, 32, 32000),
}
TRAINED = [r for r in RUNS if r["mode"] != "frozen"]  # "frozen": no adapters, a reference for the base
LORA = [r for r in TRAINED if r["mode"] == "lora"]


def _id(run: dict[str, Any]) -> str:
    rank = f"-r{run['rank']}" if run["mode"] == "lora" else ""
    return f"{run['shape']}-{run['mode']}{rank}-{'ckpt' if run['ckpt'] else 'nockpt'}-b{run['b']}"


def _forecast(run: dict[str, Any], gpu: Hardware | None = None) -> Forecast:
    h, layers, heads, vocab = SHAPES[run["shape"]]
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
    )
    return forecast(inp(workload, deployment(gpu or hardware(gpu_spec("H200_SXM")), gpus=1)))


def _peak_gb(run: dict[str, Any]) -> float:
    return float(run["reserved"] + run["context"]) / 1e9


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
    if gpu.memory_gb < 150:
        assert overflowing  # 145.1 GB (7B LoRA) is over every GPU but the B200; 118.6 GB (7B full) over 80-94


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
    from forecast.compute import ADAPTER_BYTES, adapted_width

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


def test_the_frozen_base_without_checkpointing_runs_at_the_measured_share() -> None:
    """NO_RECOMPUTE_SHARE: the frozen base's 4Ψ per token without checkpointing against its 6Ψ with it, same
    shape and call."""
    from forecast.compute import NO_RECOMPUTE_SHARE

    frozen = [r for r in EIGHT_B if r["mode"] == "frozen" and r["shape"] in ("3b", "7b", "8b")]
    rate = {(r["shape"], r["ckpt"], r["b"]): r["tok_s"] * (6 if r["ckpt"] else 4) for r in frozen}
    shares = [
        rate[k] / rate[(k[0], 1, ckpt_b)]
        for k in rate
        if not k[1]
        for ckpt_b in (4, 8)
        if (k[0], 1, ckpt_b) in rate
    ]
    assert len(shares) == 4  # 3B, 7B, 8B at micro-batch 2 and 4
    assert all(abs(share / NO_RECOMPUTE_SHARE - 1) <= 0.03 for share in shares), shares


def test_every_frozen_base_lands_on_the_two_terms() -> None:
    """frozen_base_seconds_per_token (forecast/compute.py) against each frozen base measured: its byte
    coefficients were drawn from the 8B and its three one-factor variants; 1.5B, 3B and 7B were not used.
    The workload carries no key-value heads, so the forecast takes the key-value width as h: the shapes
    with 32 key-value heads (7B, 8b-kv32) land within 1 %, those with 8 (1.5B, 3B, 8B) read 0.92-0.95:
    the forecast errs slow."""
    from forecast.compute import frozen_base_seconds_per_token

    frozen = [r for r in RUNS if r["mode"] == "frozen"]
    assert {r["shape"] for r in frozen} >= {"1b", "3b", "7b", "8b"}
    for run in frozen:
        workload = _forecast({**run, "mode": "lora", "trainable": 0}).input.workload
        ratio = (1 / run["tok_s"]) / frozen_base_seconds_per_token(workload, 989.4, 4.8)
        assert 0.90 <= ratio <= 1.02, f"{_id(run)}: measured / forecast seconds per token {ratio:.3f}"
