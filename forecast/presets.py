"""Model presets: the shapes of common open-weight models, so that `scripts/forecast dev --model llama-3-70b`
is one flag instead of five shape keys typed by hand (docs/FORECAST.md, "Presets").

Each shape is its model's published Hugging Face `config.json` (`num_hidden_layers`, `hidden_size`,
`num_attention_heads`, `num_key_value_heads`, `intermediate_size`, `vocab_size`), and the parameter count is
the total its model card states; the source is beside each. A preset sets those keys of
`trainstack:training.model` and leaves the run's own (tokens, sequence length, sharding, method, micro-batch)
as the stack file has them; a `--set` after it wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple


class Preset(NamedTuple):
    parameters: float
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    ffn_hidden_size: int
    vocab_size: int
    source: str  # the config.json the shapes are read from

    def model_keys(self) -> dict[str, Any]:
        """The `trainstack:training.model` keys this preset sets."""
        return {k: v for k, v in self._asdict().items() if k != "source"}


HF = "https://huggingface.co"
PRESETS: Mapping[str, Preset] = {
    # Llama 3 and 3.1 share the 8B and 70B shapes; 405B is 3.1's.
    "llama-3-8b": Preset(8.03e9, 32, 4096, 32, 8, 14336, 128256, f"{HF}/meta-llama/Meta-Llama-3-8B"),
    "llama-3-70b": Preset(70.6e9, 80, 8192, 64, 8, 28672, 128256, f"{HF}/meta-llama/Meta-Llama-3-70B"),
    "llama-3.1-405b": Preset(405.9e9, 126, 16384, 128, 8, 53248, 128256, f"{HF}/meta-llama/Llama-3.1-405B"),
    # Llama 2's 7B and 13B are multi-head (a key-value head per head); its 70B is grouped-query.
    "llama-2-7b": Preset(6.74e9, 32, 4096, 32, 32, 11008, 32000, f"{HF}/meta-llama/Llama-2-7b-hf"),
    "llama-2-13b": Preset(13.0e9, 40, 5120, 40, 40, 13824, 32000, f"{HF}/meta-llama/Llama-2-13b-hf"),
    "llama-2-70b": Preset(69.0e9, 80, 8192, 64, 8, 28672, 32000, f"{HF}/meta-llama/Llama-2-70b-hf"),
    "mistral-7b": Preset(7.24e9, 32, 4096, 32, 8, 14336, 32000, f"{HF}/mistralai/Mistral-7B-v0.1"),
    "qwen2.5-7b": Preset(7.61e9, 28, 3584, 28, 4, 18944, 152064, f"{HF}/Qwen/Qwen2.5-7B"),
    "qwen2.5-72b": Preset(72.7e9, 80, 8192, 64, 8, 29568, 152064, f"{HF}/Qwen/Qwen2.5-72B"),
}
# The names people also type: "llama-3.1-8b" is Llama 3's 8B shapes, "llama-3-405b" is 3.1's.
ALIASES = {
    "llama-3.1-8b": "llama-3-8b",
    "llama-3.1-70b": "llama-3-70b",
    "llama-3-405b": "llama-3.1-405b",
    "mistral-7b-v0.1": "mistral-7b",
}


class UnknownPreset(ValueError):
    """A `--model` name no preset has; the message lists them and the closest one."""


def preset(name: str) -> Preset:
    key = name.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    if key in PRESETS:
        return PRESETS[key]
    import difflib

    close = difflib.get_close_matches(key, [*PRESETS, *ALIASES], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UnknownPreset(
        f"--model {name}: no such preset; {hint}the presets: {', '.join(PRESETS)} (or set the shapes with "
        "--set layers=... --set hidden_size=... and the rest, docs/FORECAST.md)"
    )


def apply_preset(raw: Mapping[str, Any], name: str, namespace: str = "trainstack") -> dict[str, Any]:
    """The stack's raw config with the preset's model keys set in `trainstack:training.model` (the run's
    own keys kept)."""
    keys = preset(name).model_keys()
    out = dict(raw)
    training = dict(out.get(f"{namespace}:training") or {})
    model = dict(training.get("model") or {})
    training["model"] = model | keys
    out[f"{namespace}:training"] = training
    return out
