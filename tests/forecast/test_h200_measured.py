"""The forecast against the GPT job measured on H200 (docs/journal/2026-11-30-gpu.md, "The transformer on
H200").

Inputs are the runs' own: GPT-2-shaped models from train/gpt_config.py, sequence 1024, micro-batch 16, bf16,
AdamW, FlashAttention (PyTorch SDPA), no activation checkpointing, the default MFU. Measured tokens/s per GPU
and peak memory (`torch.cuda.max_memory_allocated`, GiB converted to decimal GB) are the table's figures.
Each must be within 25 % of the forecast, the tolerance issue #23 sets.
"""

from __future__ import annotations

import pytest

from facts.gpus import gpu_spec
from forecast import Forecast, Hardware, forecast
from forecast.model import Sharding
from tests.forecast.factories import SEVEN_B, deployment, inp
from train.gpt_config import PRESETS

GIB = 2**30 / 1e9

# H200 SXM: 141 GB (NVIDIA H200 datasheet, https://www.nvidia.com/en-us/data-center/h200/); its dense bf16
# tensor-core peak is the H100 SXM's, which the GPU table holds; its HBM bandwidth 4.8 TB/s.
H200 = Hardware("H200", 141.0, {"bf16": gpu_spec("H100_SXM").peak_tflops_bf16}, 4.8)

# (preset, GPUs, sharding, measured tokens/s per GPU, measured peak GiB)
MEASURED: list[tuple[str, int, Sharding, float, float]] = [
    ("gpt-350m", 1, "ddp", 145_464, 28.8),
    ("gpt-350m", 2, "ddp", 139_677, 28.8),
    ("gpt-350m", 2, "zero3", 104_762, 23.4),
    ("gpt-124m", 1, "ddp", 314_805, 16.5),
]


def _forecast(preset: str, gpus: int, sharding: Sharding) -> Forecast:
    cfg = PRESETS[preset]
    workload = SEVEN_B._replace(
        parameters=float(cfg.num_params()),
        tokens=1e9,
        sharding=sharding,
        layers=cfg.n_layer,
        hidden_size=cfg.n_embd,
        attention_heads=cfg.n_head,
        vocab_size=cfg.vocab_size,
        sequence_length=cfg.seq_len,
        micro_batch_per_gpu=16,
        block="gpt",
    )
    return forecast(inp(workload, deployment(H200, gpus=gpus)))


@pytest.mark.parametrize(("preset", "gpus", "sharding", "tokens_per_gpu", "peak_gib"), MEASURED)
def test_throughput_within_25_percent(
    preset: str, gpus: int, sharding: Sharding, tokens_per_gpu: float, peak_gib: float
) -> None:
    ratio = tokens_per_gpu / _forecast(preset, gpus, sharding).compute.tokens_per_gpu_second
    assert 0.75 <= ratio <= 1.25, f"{preset} {gpus} GPU(s) {sharding}: tokens/s ratio {ratio:.2f}"


@pytest.mark.parametrize(("preset", "gpus", "sharding", "tokens_per_gpu", "peak_gib"), MEASURED)
def test_memory_within_25_percent(
    preset: str, gpus: int, sharding: Sharding, tokens_per_gpu: float, peak_gib: float
) -> None:
    ratio = peak_gib * GIB / _forecast(preset, gpus, sharding).memory.total
    assert 0.75 <= ratio <= 1.25, f"{preset} {gpus} GPU(s) {sharding}: memory ratio {ratio:.2f}"
