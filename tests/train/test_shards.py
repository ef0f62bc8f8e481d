"""Token shards: the layout written and read back, the split between nodes, resumable windows, bad dirs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from train.shards import FORMAT, ShardError, load, main, write_synthetic


def test_layout_on_disk(tmp_path: Path) -> None:
    write_synthetic(tmp_path, shards=3, tokens_per_shard=1000, vocab_size=50304, seed=1)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["format"] == FORMAT and manifest["dtype"] == "uint16" and manifest["vocab_size"] == 50304
    assert [s["name"] for s in manifest["shards"]] == [f"shard-0000{i}.bin" for i in range(3)]
    raw = np.fromfile(tmp_path / "shard-00001.bin", dtype="<u2")
    assert raw.size == 1000 and raw.max() < 50304
    write_synthetic(tmp_path / "big", shards=1, tokens_per_shard=10, vocab_size=70000)
    assert json.loads((tmp_path / "big" / "manifest.json").read_text())["dtype"] == "uint32"


def test_nodes_read_disjoint_shards(tmp_path: Path) -> None:
    write_synthetic(tmp_path, shards=4, tokens_per_shard=500, vocab_size=300)
    node0, node1 = load(tmp_path, 0, 2, 65), load(tmp_path, 1, 2, 65)
    assert len(node0.arrays) == len(node1.arrays) == 2
    assert not np.array_equal(node0.arrays[0], node1.arrays[0])
    np.testing.assert_array_equal(node1.arrays[1], np.fromfile(tmp_path / "shard-00003.bin", dtype="<u2"))


def test_windows_depend_only_on_seed_step_rank(tmp_path: Path) -> None:
    shards = load(write_synthetic(tmp_path, 2, 4000, 512), 0, 1, 65)
    first = shards.windows(seed=0, step=7, rank=1, batch=4, length=65)
    assert first.shape == (4, 65) and first.dtype == np.int64
    np.testing.assert_array_equal(first, load(tmp_path, 0, 1, 65).windows(0, 7, 1, 4, 65))  # after a restart
    assert not np.array_equal(first, shards.windows(0, 7, 0, 4, 65))  # another rank
    assert not np.array_equal(first, shards.windows(0, 8, 1, 4, 65))  # another step


def test_synthetic_text_is_learnable(tmp_path: Path) -> None:
    """Built from 512 fixed phrases: far fewer distinct bigrams than random tokens would give."""
    write_synthetic(tmp_path, 1, 200_000, 50304)
    tokens = np.fromfile(tmp_path / "shard-00000.bin", dtype="<u2").astype(np.int64)
    bigrams = np.unique(tokens[:-1] * 50304 + tokens[1:]).size
    assert bigrams < 0.25 * (tokens.size - 1)  # 512 phrases x 63 inner bigrams + the joins
    assert math.log(50304) > 10  # the untrained loss the GPU runs start from (~10.98)


def test_bad_directories_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ShardError, match="TRAINSTACK_DATA_DIR"):
        load(tmp_path, 0, 1, 10)
    write_synthetic(tmp_path, 1, 100, 300)
    with pytest.raises(ShardError, match="none for node 1 of 2; write at least one shard per node"):
        load(tmp_path, 1, 2, 10)
    with pytest.raises(ShardError, match="fewer than one window of 101"):
        load(tmp_path, 0, 1, 101)
    (tmp_path / "shard-00000.bin").write_bytes(b"\0" * 10)
    with pytest.raises(ShardError, match="expected 200 bytes"):
        load(tmp_path, 0, 1, 10)
    assert main([str(tmp_path / "x"), "--shards", "0"]) == 2
