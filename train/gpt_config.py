"""Shapes of the GPT job's models and their training FLOPs per token (no torch: the forecast reads it too).

Sizes follow GPT-2's family (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners",
table 2: 12 x 768 for the 117M/124M model, 24 x 1024 for the 345M/350M one); the vocabulary is GPT-2's 50257
rounded up to 50304, a multiple of 64, so the embedding and output matrices tile evenly on tensor cores.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPTConfig:
    """Shape of the model; `n_embd` must divide by `n_head`."""

    n_layer: int
    n_embd: int
    n_head: int
    seq_len: int
    vocab_size: int = 50304

    def __post_init__(self) -> None:
        if min(self.n_layer, self.n_embd, self.n_head, self.seq_len, self.vocab_size) < 1:
            raise ValueError(f"{self}: every size must be at least 1")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd {self.n_embd} does not divide by n_head {self.n_head}; change one")

    def num_params(self) -> int:
        """Trainable parameters (tied embedding counted once, position embedding included)."""
        d, layer = self.n_embd, 12 * self.n_embd**2 + 13 * self.n_embd  # attn 4d^2+4d, mlp 8d^2+5d, 2 LN 4d
        return self.vocab_size * d + self.seq_len * d + self.n_layer * layer + 2 * d

    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6N for the matrix products of forward + backward, plus the attention
        scores, 12 * n_layer * n_embd * seq_len (Chowdhery et al. 2022, PaLM, appendix B). N leaves out the
        position embedding (a lookup, no product) but keeps the tied output projection, which is a product."""
        dense = self.num_params() - self.seq_len * self.n_embd
        return 6.0 * dense + 12.0 * self.n_layer * self.n_embd * self.seq_len


PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(n_layer=2, n_embd=64, n_head=4, seq_len=64, vocab_size=512),  # CPU tests
    "gpt-124m": GPTConfig(n_layer=12, n_embd=768, n_head=12, seq_len=1024),
    "gpt-350m": GPTConfig(n_layer=24, n_embd=1024, n_head=16, seq_len=1024),
}
