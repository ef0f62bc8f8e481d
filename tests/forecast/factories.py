"""Workloads and deployments for the forecast tests: one valid baseline, changed one field at a time."""

from __future__ import annotations

from typing import Any

from forecast import Deployment, ForecastInput, Hardware, Workload

# NVIDIA A100 datasheet (https://www.nvidia.com/en-us/data-center/a100/): 80 GB, BF16 312 TFLOPS dense,
# 2,039 GB/s (SXM 80 GB); no FP8 tensor cores. The source article's worked figures are on this
# GPU.
A100 = Hardware("A100_80GB", 80.0, {"bf16": 312.0}, 2.039)
H100 = Hardware("H100_SXM", 80.0, {"bf16": 989.4, "fp8": 1979.0}, 3.35)

# Llama-2-7B's shapes (https://huggingface.co/meta-llama/Llama-2-7b-hf, config.json).
SEVEN_B = Workload(
    parameters=7e9,
    tokens=5e8,
    method="full",
    trainable_fraction=1.0,
    precision="bf16",
    optimizer="adamw",
    sharding="ddp",
    layers=32,
    hidden_size=4096,
    attention_heads=32,
    vocab_size=32000,
    sequence_length=2048,
    micro_batch_per_gpu=1,
    activation_checkpointing=False,
    flash_attention=True,
    mfu=None,
    overhead=0.3,
)


def deployment(gpu: Hardware = A100, gpus: int = 8, **changes: Any) -> Deployment:
    base = Deployment(
        gpu=gpu,
        gpus_per_job=gpus,
        jobs=1,
        compute_usd_per_hour=gpus * 2.0,
        spot_compute_usd_per_hour=None,
        storage_usd_per_hour=0.0,
        max_run_hours=24.0,
    )
    return base._replace(**changes)


def inp(workload: Workload = SEVEN_B, dep: Deployment | None = None, **changes: Any) -> ForecastInput:
    return ForecastInput(workload._replace(**changes), dep or deployment())
