"""Rendering: golden files for the three stacks, file formats, shellcheck and `bash -n`, no secrets."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from components.artifacts import write_artifacts
from components.render import Artifacts, Node, render_artifacts, render_hostfile, render_hosts
from tests.components.conftest import STACKS, fake_nodes, stack_config

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"  # UPDATE_GOLDEN=1 pytest tests/components rewrites them


def _render(stack: str) -> Artifacts:
    config = stack_config(stack)
    return render_artifacts(
        stack, config, fake_nodes(config), "http://127.0.0.1:9000" if config.bucket else None
    )


def _as_rank(node0: str, stack: str, rank: int) -> str:
    """Node 0's script as node `rank`'s must read: only what names the node may differ.

    A cluster node changes its rank; a pod of a `pods` pool is its own one-node job (rank 0), so its job
    name, checkpoint dir and bucket prefix carry the pool index instead.
    """
    lines = node0.splitlines(keepends=True)
    lines[1] = (
        lines[1]
        .replace("start-node-0.sh", f"start-node-{rank}.sh")
        .replace(", node 0 of", f", node {rank} of")
    )
    text = "".join(lines).replace("TRAINSTACK_POD_INDEX:-0}", f"TRAINSTACK_POD_INDEX:-{rank}}}", 1)
    if "(topology cluster" in lines[1]:
        return text.replace("RENDERED_NODE_RANK=0\n", f"RENDERED_NODE_RANK={rank}\n", 1)
    text = text.replace(f"{stack}-pod-0", f"{stack}-pod-{rank}")
    # its hostfile and aggregator state carry its index (render.job_files: a pool may share one volume)
    text = text.replace("hostfile-pod-0}", f"hostfile-pod-{rank}}}").replace(
        "aggregator-pod-0.json}", f"aggregator-pod-{rank}.json}}"
    )
    # and its hosts block names itself alone (the pool's fake private addresses: 10.1.2.1<rank>)
    text = text.replace("10.1.2.10 node-0\n", f"10.1.2.1{rank} node-{rank}\n", 1)
    # its run id names its own pod (tests/components/conftest.py's fake pod ids); a cluster's names node 0's
    return text.replace(f"-pod-{rank}.pod000}}", f"-pod-{rank}.pod{rank:03d}}}", 1)


@pytest.mark.parametrize("stack", STACKS)
def test_golden(stack: str) -> None:
    # Node 0's script, the hostfile and hosts are pinned in full; every other node's script must be node 0's
    # with only its rank changed (so the golden directory holds one script, not eight copies of it).
    files = _render(stack).files()
    pinned = {n: t for n, t in files.items() if not n.startswith("start-node-") or n == "start-node-0.sh"}
    directory = GOLDEN / stack
    if UPDATE:
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        for name, text in pinned.items():
            (directory / name).write_text(text)
    assert sorted(p.name for p in directory.iterdir()) == sorted(pinned), "re-run with UPDATE_GOLDEN=1"
    for name, text in pinned.items():
        assert (directory / name).read_text() == text, f"{stack}/{name} changed; re-run with UPDATE_GOLDEN=1"
    node0 = files["start-node-0.sh"]
    for name, text in files.items():
        if name.startswith("start-node-") and name != "start-node-0.sh":
            rank = int(name.removeprefix("start-node-").removesuffix(".sh"))
            assert text == _as_rank(node0, stack, rank), f"{stack}/{name} differs from node 0 beyond its rank"


def test_prod_hostfile_and_hosts() -> None:
    arts = _render("prod")
    assert arts.hostfile.splitlines() == [f"10.65.0.{10 + r} slots=8" for r in range(8)]
    assert arts.hosts.splitlines() == [f"10.65.0.{10 + r} node-{r}" for r in range(8)]
    assert sorted(arts.start_scripts) == [f"start-node-{r}.sh" for r in range(8)]


def test_rank_order_not_input_order() -> None:
    nodes = [Node(1, "10.0.0.2", "b", "h", 2), Node(0, "10.0.0.1", "a", "h", 1)]
    assert render_hostfile(nodes, 4) == "10.0.0.1 slots=4\n10.0.0.2 slots=4\n"
    assert render_hosts(nodes) == "10.0.0.1 node-0\n10.0.0.2 node-1\n"


@pytest.mark.parametrize(
    ("nodes", "error"),
    [
        ([Node(0, "10.0.0.1", "a", "h", 1), Node(2, "10.0.0.3", "c", "h", 1)], "no gaps"),
        ([Node(0, "10.0.0.1; rm -rf /", "a", "h", 1)], "no usable IP"),
        ([], "no gaps"),
    ],
)
def test_bad_node_lists_are_refused(nodes: list[Node], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        render_hosts(nodes)


def test_pods_are_independent_jobs() -> None:
    scripts = _render("search").start_scripts
    for rank in range(4):
        text = scripts[f"start-node-{rank}.sh"]
        assert "RENDERED_NODE_RANK=0\nRENDERED_NUM_NODES=1\n" in text
        assert "RENDERED_MASTER_ADDR=127.0.0.1\n" in text
        assert (
            f"TRAINSTACK_CHECKPOINT_PREFIX=${{TRAINSTACK_CHECKPOINT_PREFIX:-trainstack/search-pod-{rank}}}"
            in text
        )


def test_no_secret_value_and_no_reference_in_scripts() -> None:
    """Scripts name secrets (to check they arrived) but hold neither values nor RunPod references."""
    for stack in STACKS:
        for text in _render(stack).start_scripts.values():
            assert "RUNPOD_SECRET_trainstack" not in text
            assert not re.search(r"(HF_TOKEN|WANDB_API_KEY|AWS_SECRET_ACCESS_KEY)=\S", text)


def _all_scripts() -> list[tuple[str, str]]:
    return [(f"{s}/{n}", t) for s in STACKS for n, t in sorted(_render(s).start_scripts.items())]


@pytest.mark.parametrize(("name", "text"), _all_scripts(), ids=[n for n, _ in _all_scripts()])
def test_scripts_pass_bash_n_and_shellcheck(name: str, text: str, tmp_path: Path) -> None:
    path = tmp_path / "start.sh"
    path.write_text(text)
    subprocess.run(["bash", "-n", str(path)], check=True)
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is not installed: apt-get install -y shellcheck (scripts/bootstrap does)")
    result = subprocess.run(["shellcheck", "--shell=bash", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_write_artifacts(tmp_path: Path) -> None:
    arts = _render("prod")
    paths = write_artifacts(tmp_path / "out" / "prod", arts)
    assert {p.name for p in paths} == set(arts.files())
    script = tmp_path / "out" / "prod" / "start-node-0.sh"
    assert script.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out" / "prod" / "hostfile").read_text() == arts.hostfile
    assert not list((tmp_path / "out" / "prod").glob(".*.tmp"))
