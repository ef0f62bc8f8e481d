"""Memory one GPU needs for a training step: model states, activations, buffers and an allowance.

Symbols: Ψ parameters, Ψt = f·Ψ trainable parameters (f = 1 for full training), N the data-parallel degree
(GPUs of one job), L layers, h hidden size, a attention heads, s sequence length, b micro-batch per GPU,
V vocabulary. Bytes; reported in decimal GB.

Model states — Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models" (https://arxiv.org/abs/1910.02054), §3.1 and Figure 1: mixed-precision training keeps 16-bit
weights (2Ψ), 16-bit gradients (2Ψ) and K·Ψ bytes of optimizer state, K = 12 for Adam (fp32 master
weights, momentum and variance). The ZeRO stages divide by N:

    ddp    2Ψ + 2Ψ + KΨ              zero1  2Ψ + 2Ψ + KΨ/N
    zero2  2Ψ + (2 + K)Ψ/N           zero3  (2 + 2 + K)Ψ/N   (PyTorch FSDP FULL_SHARD is the same sharding)

    K: adamw 12; adamw_8bit 6 = fp32 master weights 4 + two 8-bit states 2 (Dettmers et al. 2022,
    "8-bit Optimizers via Block-wise Quantization", https://arxiv.org/abs/2110.02861); sgd 8 = fp32
    master weights + fp32 momentum.

LoRA (Hu et al. 2021, https://arxiv.org/abs/2106.09685) freezes the base: 16-bit weights for Ψ + Ψt, but
gradients (2Ψt) and optimizer state (KΨt) only for the adapters. FP8 training (Micikevicius et al. 2022,
https://arxiv.org/abs/2209.05433) casts the matmul inputs to FP8 and keeps the weights and optimizer in
higher precision, so the states above are unchanged by `precision`.

Activations — Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(https://arxiv.org/abs/2205.05198), §4.1 (16-bit activations, no tensor parallelism), for the GPT block
(`block: gpt`, LayerNorm and a GELU MLP of 4h, with dropout):

    per layer            s·b·h·(K + 5·a·s/h), K = 34
    with FlashAttention  s·b·h·K   (the a·s² score, softmax and dropout terms are never stored; Dao et al.
                                    2022, https://arxiv.org/abs/2205.14135 — the same saving as the
                                    paper's selective recomputation)
    full checkpointing   2·s·b·h per layer (each block's input, §4.2: "full activation recomputation ...
                         2sbhL"; 6 for a module of fp32 master weights, below) + the larger of one
                         layer's full activations (rebuilt during its backward) and the output layer's (whose
                         backward runs first, before any layer is rebuilt)
    output layer         4·s·b·h + 12·s·b·V: the final norm's and output layer's inputs (4·s·b·h, §4.3) and
                         the logits. §4.3 counts one fp32 copy (4·s·b·V); a loss computed as
                         cross_entropy(logits.float()) holds at its peak the 16-bit logits (2), their fp32
                         copy (4), the fp32 log-softmax kept for the backward pass (4) and part of its
                         gradient.

Measured on one H200 (docs/journal/2026-12-01-gpu.md, "LoRA on H200": Hugging Face Llama shapes of
1.5B-8B, s = 2048, bf16 autocast, SDPA; activations = max_memory_allocated less the model states):
- the Llama block (`block: llama`, RMSNorm computed in fp32, SwiGLU MLP, no dropout) keeps more than the
  GPT block's 34, and what it keeps grows with the FFN's width F, not with h alone: per token per layer,
  H·h + 8·F bytes. The 8·F is the SwiGLU MLP's four F-wide bf16 tensors kept for the backward pass (gate's
  output, which SiLU keeps; SiLU's output and up's output, which their product keeps; down's input); H·h
  the rest (two fp32 RMSNorm inputs and their bf16 outputs, SDPA's q, k and v at full width after
  repeat_kv and its output, o's input; a full fine-tune's norms also keep their fp32 outputs, its weights
  train). H = 28 (LoRA) and 33.5 (full), fitted to the 37 runs without checkpointing of
  docs/gpu-validation/2026-12-03-h200-sweep (least squares of log(forecast / measured)); a free fit of
  both terms gives 28.5·h + 7.7·F. At Llama-2's F = 2.7h this is the 50 per s·b·h first measured here
  (49.6 for the 7B, 46.8 for the 3B); at Qwen 2.5's F = 5.3-5.8h, with its ~150k vocabulary, it is
  70-75, which a flat 50 missed (issue #69);
- at V = 128256 the logits take 12 bytes each (checkpointed 1.5B/3B/8B LoRA runs: what is left beside
  12·s·b·V is 2.0-2.4 bytes per s·b·h per layer, the 2 checkpointing keeps); 10 was fitted to GPT-2 runs;
- checkpointed, the peak is the loss's, not loss plus a rebuilt layer (7B, V = 32000: 5.3 GB measured, 5.4
  forecast, 6.6 with the sum).
The GPT-2 runs of train/gpt_config.py (same document, "The transformer on H200") keep `block: gpt`.

Activations are per micro-batch and are not divided by N (every data-parallel rank holds its own).

Buffers — zero3 gathers each layer's full 16-bit weights before using it and prefetches the next (Zhao et
al. 2023, "PyTorch FSDP", https://arxiv.org/abs/2304.11277, §3.3.2): 2 layers x 12·h² parameters x 2 bytes
(a transformer block holds ≈ 12·h² parameters: Kaplan et al. 2020, https://arxiv.org/abs/2001.08361, §2.1).

The peak — the larger of the end of the forward pass (weights, optimizer state, activations) and
the end of the backward pass (every gradient; the activations gone): tensors = weights + optimizer + buffers
+ max(gradients, activations). Checkpointed, a full fine-tune keeps 6 bytes per s·b·h per layer (its module
holds fp32 master weights, so its residual stream is fp32: measured 4.9-7.3), LoRA's bf16 base 2.

Allowance — the CUDA context, measured 0.80-0.82 GB (mem_get_info less memory_reserved, H200, torch 2.11,
CUDA 13), plus 1.2 GB for NCCL's and cuBLAS's buffers on a job of several GPUs (an assumption). The
allocator's cache beyond the tensors is not counted: PyTorch frees it and retries before an out-of-memory
error, so the forecast is judged against max_memory_allocated + the context.

Uncertainty band (docs/FORECAST.md) — 0.90 x the tensors + the context to 1.10 x the tensors + the
allowance: measured / forecast 0.92-1.06 over the 66 runs of docs/gpu-validation/2026-12-03-h200-sweep and
0.94-1.00 over 27 earlier full-depth runs; `fits` means the upper end fits.
"""

from __future__ import annotations

from forecast.model import Hardware, MemoryForecast, Workload
from forecast.shapes import ffn_width

GB = 1e9
WEIGHT_BYTES = 2  # bf16/fp16 weights and gradients
OPTIMIZER_BYTES: dict[str, float] = {"adamw": 12, "adamw_8bit": 6, "sgd": 8}  # K, bytes per trainable param
LAYER_BYTES: dict[str, float] = {"gpt": 34.0}  # K per s·b·h per layer (see above)
# The Llama block, bytes per token per layer: LLAMA_HIDDEN_BYTES[method]·h + LLAMA_FFN_BYTES·F (see above)
LLAMA_HIDDEN_BYTES: dict[str, float] = {"lora": 28.0, "full": 33.5}
LLAMA_FFN_BYTES = 8.0  # SwiGLU: gate's output, SiLU's output, up's output, down's input, bf16 each
# Checkpointed, bytes kept per s·b·h per layer (each block's input): 2 for a bf16 model (LoRA's frozen base,
# measured 2.0-2.4), 6 for a full fine-tune whose module holds fp32 master weights, so its residual stream
# is fp32 (measured 4.9-7.3 with the output layer's share, docs/gpu-validation/2026-12-03-h200-sweep).
CHECKPOINT_BYTES: dict[str, float] = {"lora": 2.0, "full": 6.0}
LOGITS_BYTES = 12.0  # per logit (see above)
PREFETCHED_LAYERS = 2  # zero3: the layer computing and the one gathered ahead of it
CUDA_CONTEXT_GB = 0.8  # measured 0.80-0.82 GB on H200 (mem_get_info used less memory_reserved)
# NCCL's and cuBLAS's buffers of a job over several GPUs: an assumption (not measured; one GPU has none)
COLLECTIVE_BUFFERS_GB = 1.2
# The tensors' band: measured (max_memory_allocated + context) / forecast 0.92-1.06 over the 66 runs of
# docs/gpu-validation/2026-12-03-h200-sweep (calls 1 and 2, every run) and 0.94-1.00 over the 27 earlier
# full and LoRA runs of docs/gpu-validation/2026-12-01-h200-lora* that were never fitted; the upper end
# 1.10 x the tensors keeps every one of them at or under it.
BAND_TENSORS = (0.90, 1.10)


def model_states(w: Workload, gpus: int) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes per GPU under the workload's sharding."""
    trainable = w.parameters * w.trainable_fraction
    stored = w.parameters + trainable if w.method == "lora" else w.parameters
    weights = WEIGHT_BYTES * stored
    gradients = WEIGHT_BYTES * trainable
    optimizer = OPTIMIZER_BYTES[w.optimizer] * trainable
    if w.sharding in ("zero1", "zero2", "zero3"):
        optimizer /= gpus
    if w.sharding in ("zero2", "zero3"):
        gradients /= gpus
    if w.sharding == "zero3":
        weights /= gpus
    return weights, gradients, optimizer


def layer_activations(w: Workload) -> float:
    """Bytes one transformer layer keeps for its backward pass (Korthikanti et al. 2022, §4.1)."""
    s, b, h, a = w.sequence_length, w.micro_batch_per_gpu, w.hidden_size, w.attention_heads
    if w.block == "llama":
        kept = LLAMA_HIDDEN_BYTES[w.method] + LLAMA_FFN_BYTES * ffn_width(w) / h
    else:
        kept = LAYER_BYTES[w.block]
    per_token_hidden = kept if w.flash_attention else kept + 5.0 * a * s / h
    return s * b * h * per_token_hidden


def activations(w: Workload) -> float:
    """Bytes of activations per GPU for one micro-batch, checkpointed or not, with the output layer."""
    s, b, h = w.sequence_length, w.micro_batch_per_gpu, w.hidden_size
    output_layer = 4.0 * s * b * h + LOGITS_BYTES * s * b * w.vocab_size
    if w.activation_checkpointing:
        kept = CHECKPOINT_BYTES[w.method] * s * b * h
        return w.layers * kept + max(layer_activations(w), output_layer)
    return w.layers * layer_activations(w) + output_layer


def gather_buffers(w: Workload) -> float:
    """zero3's unsharded working copies of whole layers' weights, in bytes; 0 for other modes."""
    if w.sharding != "zero3":
        return 0.0
    return PREFETCHED_LAYERS * 12.0 * w.hidden_size**2 * WEIGHT_BYTES


def memory(w: Workload, gpu: Hardware, gpus: int) -> MemoryForecast:
    """Per-GPU memory of the workload on `gpus` data-parallel GPUs of type `gpu`, in GB.

    The peak is the larger of two moments: the end of the forward pass (weights, optimizer state and the
    activations; the gradients of the last step were freed by zero_grad(set_to_none)) and the end of the
    backward pass (every gradient, the activations gone). Measured on H200 (docs/FORECAST.md, "Memory"):
    `max_memory_allocated` + the CUDA context lies within 0.92-1.06 of this peak over 66 sweep runs and 27
    earlier full-depth runs (0.94-1.00), full and LoRA, checkpointed or not.
    """
    weights, gradients, optimizer = (x / GB for x in model_states(w, gpus))
    acts = activations(w) / GB
    buffers = gather_buffers(w) / GB
    tensors = weights + optimizer + buffers + max(gradients, acts)
    allowance = CUDA_CONTEXT_GB + (COLLECTIVE_BUFFERS_GB if gpus > 1 else 0.0)
    total = tensors + allowance
    low = BAND_TENSORS[0] * tensors + CUDA_CONTEXT_GB
    high = BAND_TENSORS[1] * tensors + allowance
    return MemoryForecast(
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        activations=acts,
        gather_buffers=buffers,
        allowance=allowance,
        total=total,
        gpu_memory=gpu.memory_gb,
        headroom=gpu.memory_gb - total,
        total_low=low,
        total_high=high,
    )
