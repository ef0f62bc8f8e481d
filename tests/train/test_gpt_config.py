"""GPT shapes: parameter counts against GPT-2's published sizes, FLOPs per token against hand arithmetic."""

from __future__ import annotations

import pytest

from train.gpt_config import PRESETS, GPTConfig


def test_parameter_counts_match_gpt2_sizes() -> None:
    # GPT-2 small is 124M with a 50257 vocabulary; ours pads it to 50304 (+47 x 768 = 36,096).
    assert PRESETS["gpt-124m"].num_params() == 124_439_808 + 36_096
    assert 350e6 < PRESETS["gpt-350m"].num_params() < 360e6


def test_flops_per_token_by_hand() -> None:
    cfg = GPTConfig(n_layer=2, n_embd=8, n_head=2, seq_len=4, vocab_size=10)
    per_layer = 12 * 64 + 13 * 8
    params = 10 * 8 + 4 * 8 + 2 * per_layer + 2 * 8
    assert cfg.num_params() == params
    assert cfg.flops_per_token() == 6 * (params - 4 * 8) + 12 * 2 * 8 * 4


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="does not divide by n_head 5"):
        GPTConfig(n_layer=1, n_embd=8, n_head=5, seq_len=4)
    with pytest.raises(ValueError, match="at least 1"):
        GPTConfig(n_layer=0, n_embd=8, n_head=2, seq_len=4)
