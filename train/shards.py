"""Token shards on the node's disk: the layout the GPT job reads, and a synthetic generator for tests.

Layout (one directory, `TRAINSTACK_DATA_DIR`, on the node's NVMe or network volume):

    <dir>/manifest.json      {"format": "trainstack-tokens-v1", "dtype": "uint16" | "uint32",
                              "vocab_size": V, "shards": [{"name": "shard-00000.bin", "tokens": N}, ...]}
    <dir>/shard-00000.bin    N token ids, little-endian `dtype`, no header (np.memmap reads it in place)
    <dir>/shard-00001.bin    ...

Shards are split between nodes by index: node k of K reads the shards whose index i has i % K == k
(the start script exports TRAINSTACK_SHARD_INDEX/TRAINSTACK_NUM_SHARDS). A node with no shard of its own
is an error, not a silent reuse of another node's data. Within a node each rank draws its own windows.

Generate synthetic shards (nothing is downloaded):
    python3 train/shards.py DIR --shards 4 --tokens-per-shard 2000000 --vocab 50304
The synthetic text is a random choice, token by token, among a fixed set of random "phrases", so a model
can learn it (the loss falls well under ln V) while its content carries no meaning.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "trainstack-tokens-v1"
_DTYPES: dict[str, np.dtype[Any]] = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}


class ShardError(ValueError):
    """The data directory does not follow the layout; the message says what to fix."""


@dataclass(frozen=True)
class Shards:
    """The memory-mapped shards one node reads."""

    vocab_size: int
    arrays: tuple[np.ndarray[Any, Any], ...]

    def windows(self, seed: int, step: int, rank: int, batch: int, length: int) -> np.ndarray[Any, Any]:
        """`batch` windows of `length` tokens, fixed by (seed, step, rank): a resume needs no loader state."""
        rng = np.random.default_rng([seed, step, rank])
        picks = rng.integers(0, len(self.arrays), size=batch)
        out = np.empty((batch, length), dtype=np.int64)
        for row, shard in enumerate(picks):
            array = self.arrays[shard]
            start = int(rng.integers(0, len(array) - length + 1))
            out[row] = array[start : start + length]
        return out


def load(directory: Path, shard_index: int, num_shards: int, min_tokens: int) -> Shards:
    """Map this node's shards; every shard must hold at least `min_tokens` (one window)."""
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise ShardError(
            f"{manifest_path} is missing; point TRAINSTACK_DATA_DIR at a token-shard directory "
            f"(make synthetic ones with: python3 train/shards.py {directory})"
        )
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("format") != FORMAT or manifest.get("dtype") not in _DTYPES:
        raise ShardError(f"{manifest_path}: expected format {FORMAT!r} with dtype uint16 or uint32")
    dtype = _DTYPES[manifest["dtype"]]
    mine = [s for i, s in enumerate(manifest["shards"]) if i % num_shards == shard_index]
    if not mine:
        raise ShardError(
            f"{directory} has {len(manifest['shards'])} shards, none for node {shard_index} of {num_shards}; "
            "write at least one shard per node"
        )
    arrays = []
    for entry in mine:
        path = directory / entry["name"]
        expected = int(entry["tokens"]) * dtype.itemsize
        if not path.is_file() or path.stat().st_size != expected:
            raise ShardError(f"{path}: expected {expected} bytes ({entry['tokens']} tokens); regenerate it")
        if int(entry["tokens"]) < min_tokens:
            raise ShardError(f"{path} has {entry['tokens']} tokens, fewer than one window of {min_tokens}")
        arrays.append(np.memmap(path, dtype=dtype, mode="r"))
    return Shards(int(manifest["vocab_size"]), tuple(arrays))


def write_synthetic(
    directory: Path, shards: int, tokens_per_shard: int, vocab_size: int, seed: int = 0
) -> Path:
    """Write `shards` learnable synthetic shards, then the manifest (its presence means done)."""
    if shards < 1 or tokens_per_shard < 2 or not 2 <= vocab_size <= 2**32:
        raise ShardError("need shards >= 1, tokens_per_shard >= 2 and 2 <= vocab_size <= 2**32")
    dtype_name = "uint16" if vocab_size <= 2**16 else "uint32"
    dtype = _DTYPES[dtype_name]
    rng = np.random.default_rng(seed)
    phrase_len = 64
    phrases = rng.integers(0, vocab_size, size=(512, phrase_len), dtype=np.int64).astype(dtype)
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for index in range(shards):
        count = -(-tokens_per_shard // phrase_len)
        tokens = phrases[rng.integers(0, len(phrases), size=count)].reshape(-1)[:tokens_per_shard]
        name = f"shard-{index:05d}.bin"
        tokens.tofile(directory / name)
        entries.append({"name": name, "tokens": tokens_per_shard})
    manifest = {"format": FORMAT, "dtype": dtype_name, "vocab_size": vocab_size, "shards": entries}
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write synthetic token shards in trainstack's layout.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--tokens-per-shard", type=int, default=2_000_000)
    parser.add_argument("--vocab", type=int, default=50304)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        write_synthetic(args.directory, args.shards, args.tokens_per_shard, args.vocab, args.seed)
    except ShardError as exc:
        print(f"shards: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.shards} x {args.tokens_per_shard} tokens to {args.directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
