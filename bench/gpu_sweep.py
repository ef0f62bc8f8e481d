"""The held-out sweep of issue #44: full fine-tunes and LoRA of Llama shapes, widths 1024-8192, on one GPU.

Runs on the GPU machine from the repository root (python3 with torch, transformers and peft):
`PYTHONUNBUFFERED=1 python3 bench/gpu_sweep.py` writes $OUT/sweep.json after every run (a call cut short
keeps the runs before it); `SWEEP_PLAN=h100` runs the H100 call's plan (PLANS). Each run builds a Hugging
Face `LlamaForCausalLM` at random on the GPU with a few decoder layers of a real model's shape (the
forecast is given the same layer count, so it is judged per layer plus the embeddings and head), SDPA
attention, bf16 autocast, random tokens as inputs and labels, fused AdamW on what trains, 2 warm-up steps
then the median of 5 timed steps, as bench/gpu_lora.py did:

- full: fp32 weights (the master copy) under bf16 autocast, AdamW over every parameter (Hugging Face
  Trainer's bf16 layout);
- lora: a bf16 base, peft rank 16 on all seven projections, alpha 32, no dropout.

Memory: `max_memory_allocated` over the timed steps, `max_memory_reserved`, the CUDA context (mem_get_info's
used less memory_reserved) and `states`, what was allocated before the first timed step (weights and
optimizer state: the gradients are freed by zero_grad(set_to_none)).
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

OUT = Path(os.environ.get("OUT", "."))
BUDGET_S = float(os.environ.get("SWEEP_BUDGET_S", "530"))  # stop starting runs after this (the call's limit)
WARMUP, TIMED = 2, 5
# name: hidden, layers built, heads, key-value heads, FFN, vocabulary (the real model each is shaped after)
SHAPES = {
    "w1024": (1024, 8, 8, 8, 2816, 32000),  # a 0.3B-class Llama
    "w2048": (2048, 4, 16, 8, 8192, 128256),  # Llama-3.2-1B
    "w3072": (3072, 4, 24, 8, 8192, 128256),  # Llama-3.2-3B
    "w4096": (4096, 4, 32, 8, 14336, 128256),  # Llama-3-8B
    "w4096mha": (4096, 4, 32, 32, 11008, 32000),  # Llama-2-7B
    "w5120": (5120, 3, 40, 40, 13824, 32000),  # Llama-2-13B
    "w6144": (6144, 2, 48, 8, 16384, 32000),  # a 30B-class GQA shape
    "w8192": (8192, 2, 64, 8, 28672, 128256),  # Llama-3-70B
    # issue #69: a ~150k vocabulary (Qwen 2.5's 151936 and 152064) on Llama blocks, for the logits' memory
    "q896": (896, 6, 14, 2, 4864, 151936),  # Qwen2.5-0.5B's widths
    "q1536": (1536, 4, 12, 2, 8960, 151936),  # Qwen2.5-1.5B's widths
    "q3584": (3584, 4, 28, 4, 18944, 152064),  # Qwen2.5-7B's widths
    "q1536d": (1536, 12, 12, 2, 8960, 151936),  # deeper: the per-layer share apart from the logits'
    "v2048": (2048, 4, 16, 8, 8192, 151936),  # Llama-3.2-1B's layers (FFN 4h) with the large vocabulary
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
# shape, method, checkpointing, micro-batch, sequence; spread so each shape has full and LoRA, ckpt on/off
PLAN: list[tuple[str, str, int, int, int]] = [
    ("w4096", "full", 0, 2, 2048),
    ("w1024", "full", 0, 16, 1024),
    ("w8192", "full", 1, 2, 4096),
    ("w2048", "lora", 1, 1, 8192),
    ("w5120", "full", 0, 2, 2048),
    ("w3072", "full", 1, 16, 1024),
    ("w6144", "lora", 0, 4, 2048),
    ("w4096mha", "full", 0, 4, 2048),
    ("w1024", "lora", 1, 2, 8192),
    ("w8192", "lora", 0, 1, 8192),
    ("w2048", "full", 0, 4, 2048),
    ("w4096", "lora", 1, 8, 2048),
    ("w6144", "full", 1, 4, 4096),
    ("w3072", "lora", 0, 1, 8192),
    ("w5120", "lora", 1, 1, 8192),
    ("w4096mha", "lora", 1, 4, 2048),
    ("w1024", "full", 1, 8, 4096),
    ("w2048", "full", 1, 8, 2048),
    ("w8192", "full", 0, 1, 2048),
    ("w4096", "full", 1, 4, 4096),
    ("w3072", "full", 0, 2, 4096),
    ("w6144", "full", 0, 1, 4096),
    ("w5120", "full", 1, 8, 2048),
    ("w1024", "lora", 0, 4, 2048),
    ("w2048", "lora", 0, 8, 1024),
    ("w4096", "lora", 0, 4, 1024),
    ("w8192", "lora", 1, 8, 2048),
    ("w4096mha", "full", 1, 1, 8192),
    ("w3072", "lora", 1, 4, 2048),
    ("w5120", "lora", 0, 2, 4096),
    ("w6144", "lora", 1, 16, 1024),
    ("w4096", "full", 0, 1, 8192),
    ("w1024", "full", 0, 1, 1024),
    ("w2048", "full", 0, 1, 4096),
    ("w8192", "full", 0, 4, 1024),
    ("w4096", "full", 1, 16, 1024),
    ("w2048", "full", 1, 2, 8192),
    ("w8192", "full", 1, 1, 8192),
    ("w1024", "full", 1, 16, 1024),
    ("w3072", "full", 1, 1, 8192),
]


# The H100 call of issue #69: the large-vocabulary runs (no checkpointing, full and LoRA, and two
# checkpointed beside them), then call 1's plan above unchanged, so each of its runs has an H200 twin.
LARGE_VOCAB: list[tuple[str, str, int, int, int]] = [
    ("q1536", "full", 0, 4, 2048),
    ("q1536", "lora", 0, 4, 2048),
    ("q1536", "lora", 0, 8, 2048),
    ("q1536", "full", 0, 2, 4096),
    ("q3584", "full", 0, 2, 2048),
    ("q3584", "lora", 0, 4, 2048),
    ("q896", "lora", 0, 8, 2048),
    ("q896", "full", 0, 4, 4096),
    ("q1536", "full", 1, 8, 2048),
    ("q3584", "lora", 1, 8, 2048),
    ("q1536d", "lora", 0, 4, 2048),
    ("q1536d", "full", 0, 2, 2048),
    ("v2048", "lora", 0, 8, 2048),
    ("v2048", "full", 0, 4, 2048),
]
PLANS = {"h200": PLAN, "h100": LARGE_VOCAB + PLAN, "vocab": LARGE_VOCAB}


def build(shape: str, method: str, ckpt: int, s: int) -> torch.nn.Module:
    h, layers, heads, kv, ffn, vocab = SHAPES[shape]
    config = LlamaConfig(
        hidden_size=h,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=ffn,
        vocab_size=vocab,
        max_position_embeddings=max(s, 2048),
        use_cache=False,
        tie_word_embeddings=False,
    )
    config._attn_implementation = "sdpa"
    with torch.device("cuda"):
        model: torch.nn.Module = LlamaForCausalLM(config)
    if method != "full":
        model.to(torch.bfloat16)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if method == "lora":
        lora = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=TARGETS)
        model = get_peft_model(model, lora)
    return model


def run(shape: str, method: str, ckpt: int, b: int, s: int) -> dict[str, Any]:
    h, layers, heads, kv, ffn, vocab = SHAPES[shape]
    entry: dict[str, Any] = dict(shape=shape, method=method, ckpt=ckpt, b=b, s=s, hidden=h, layers=layers)
    entry.update(heads=heads, kv_heads=kv, ffn=ffn, vocab=vocab)
    model = optimizer = tokens = loss = None
    try:
        model = build(shape, method, ckpt, s)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        entry["params"] = sum(p.numel() for p in model.parameters())
        entry["trainable"] = sum(p.numel() for p in trainable)
        optimizer = torch.optim.AdamW(trainable, lr=1e-5, fused=True)
        tokens = torch.randint(0, vocab, (b, s), device="cuda")
        times = []
        for i in range(WARMUP + TIMED):
            if i == WARMUP:
                gc.collect()
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
                entry["states"] = torch.cuda.memory_allocated()
            torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.autocast("cuda", torch.bfloat16):
                loss = model(input_ids=tokens, labels=tokens).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        timed = times[WARMUP:]
        free, total = torch.cuda.mem_get_info()
        step = statistics.median(timed)
        entry.update(
            step_s=step,
            steps_s=timed,
            tokens_per_s=b * s / step,
            loss=loss.item() if loss is not None else None,
        )
        entry.update(alloc=torch.cuda.max_memory_allocated(), reserved=torch.cuda.max_memory_reserved())
        entry.update(context=total - free - torch.cuda.memory_reserved(), gpu_total=total)
        entry["phases"] = phases(model, optimizer, tokens)
    except torch.OutOfMemoryError as error:
        entry["oom"] = str(error)[:300]
    except Exception as error:
        entry["error"] = repr(error)[:500]
    del model, optimizer, tokens, loss
    gc.collect()
    torch.cuda.empty_cache()
    return entry


def phases(model: torch.nn.Module, optimizer: torch.optim.Optimizer, tokens: torch.Tensor) -> dict[str, int]:
    """One more step, untimed, read by phase: the peak of the forward pass (loss included), what the forward
    leaves for the backward, and the step's peak (the backward's, or the optimizer's)."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    with torch.autocast("cuda", torch.bfloat16):
        loss = model(input_ids=tokens, labels=tokens).loss
    forward_peak, forward_end = torch.cuda.max_memory_allocated(), torch.cuda.memory_allocated()
    loss.backward()
    backward_peak = torch.cuda.max_memory_allocated()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return dict(
        start=start,
        forward_peak=forward_peak,
        forward_end=forward_end,
        backward_peak=backward_peak,
        step_peak=torch.cuda.max_memory_allocated(),
    )


def main() -> None:
    import peft
    import transformers

    record: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "warmup": WARMUP,
        "timed": TIMED,
        "runs": [],
    }
    plan = os.environ.get("SWEEP_PLAN", "h200")
    record["plan"] = plan
    begin = time.monotonic()
    for planned in PLANS[plan]:
        if time.monotonic() - begin > BUDGET_S:
            record["cut_at"] = list(planned)
            break
        entry = run(*planned)
        entry["wall_s"] = round(time.monotonic() - begin, 1)
        record["runs"].append(entry)
        (OUT / "sweep.json").write_text(json.dumps(record, indent=1))
        print({k: v for k, v in entry.items() if k != "steps_s"}, flush=True)


if __name__ == "__main__":
    main()
