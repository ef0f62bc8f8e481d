"""Concrete claims of the docs held against the code: the shipped stacks and their caps, the spend limit, the
files each part's row names, the environment scripts/env.sh sets. Plain reads and function calls."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import pytest

from common.pulumi import environment as pulumi_environment
from facts.money import DEFAULT_SPEND_LIMIT_PER_HOUR
from localcloud.servers import demo_node_env
from stackconfig import files
from stackconfig.pricing import stack_price
from stackconfig.team import load_team

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _flat(doc: Path) -> str:
    return re.sub(r"\s+", " ", doc.read_text())


def test_the_shipped_stacks_are_the_ones_operating_names() -> None:
    text = _flat(DOCS / "OPERATING.md")
    named = re.search(r"ship in `stacks/`: ((?:`[a-z-]+`(?:, )?)+)", text)
    assert named, "docs/OPERATING.md no longer says which stacks ship"
    assert sorted(re.findall(r"`([a-z-]+)`", named.group(1))) == sorted(files.stack_names())


def test_each_stacks_run_cap_is_the_one_supervisor_md_gives() -> None:
    text = _flat(DOCS / "SUPERVISOR.md")
    sentence = re.search(r"Every shipped stack sets it in its stack file \(([^)]*)\)", text)
    assert sentence, "docs/SUPERVISOR.md no longer lists each stack's run cap"
    shown = {name: float(v.replace(",", "")) for name, v in re.findall(r"([a-z-]+) \$([\d,]+)", sentence[1])}
    actual = {name: files.load(name).run.max_cost_usd for name in files.stack_names()}
    assert shown == actual, "docs/SUPERVISOR.md's run caps and stacks/Pulumi.<stack>.yaml differ"


def test_prod_is_what_readme_and_operating_say() -> None:
    prod = files.load("prod")
    assert prod.cluster.nodes * prod.cluster.gpus_per_node == 64 and prod.cluster.gpu_type.startswith("H100")
    assert prod.protect, "docs/OPERATING.md: `trainstack:protect: true` (on in stacks/Pulumi.prod.yaml)"
    assert prod.runpod_spend_limit_per_hour > DEFAULT_SPEND_LIMIT_PER_HOUR
    price = stack_price(prod).compute_usd_per_hour
    for doc in (REPO / "README.md", DOCS / "OPERATING.md"):
        limit = re.search(r"default (?:account )?spend limit of \$(\d+)/h", _flat(doc))
        assert limit and float(limit[1]) == DEFAULT_SPEND_LIMIT_PER_HOUR, f"{doc.name}: RunPod's limit"
        per_hour = re.search(r"about \$(\d+)/h", _flat(doc))
        assert per_hour and float(per_hour[1]) == round(price), f"{doc.name}: prod's $/h is {price:.2f}"


def _rows(doc: Path) -> dict[str, str]:
    """ARCHITECTURE.md's part table: directory -> its row."""
    return {m[1]: m[0] for m in re.finditer(r"^\| `([\w.]+)/` \|.*$", doc.read_text(), re.M)}


@pytest.mark.parametrize("directory", sorted(_rows(DOCS / "ARCHITECTURE.md")))
def test_each_parts_row_names_files_that_are_in_it(directory: str) -> None:
    row = _rows(DOCS / "ARCHITECTURE.md")[directory]
    assert (REPO / directory).is_dir(), (
        f"docs/ARCHITECTURE.md has a row for {directory}/, which does not exist"
    )
    missing = []
    for name in re.findall(r"`([\w./-]+\.(?:py|json|yaml|sh))`", row):
        if "/" in name and ((REPO / name).exists() or (REPO / directory / name).exists()):
            continue
        if not any((REPO / directory).rglob(name.rsplit("/", 1)[-1])):
            missing.append(name)
    assert not missing, f"docs/ARCHITECTURE.md's {directory}/ row names files not under it: {missing}"


def test_the_scripts_row_lists_scripts_that_exist() -> None:
    row = _rows(DOCS / "ARCHITECTURE.md")["scripts"]
    listed = re.findall(r"`([a-z][a-z.-]*)`", row)
    assert "bootstrap" in listed and "env.sh" in listed
    assert [s for s in listed if not (REPO / "scripts" / s).is_file() and not (REPO / s).is_dir()] == []


def test_toolchain_environment_is_what_env_sh_exports(tmp_path: Path) -> None:
    """scripts/env.sh exports common/pulumi.py's `environment()`: the docs' settings are what it gives."""
    text = (DOCS / "TOOLCHAIN.md").read_text()
    section = text[text.index("## Environment (`scripts/env.sh`)") :]
    claimed = dict(re.findall(r"`([A-Z_]+)=([^`]+)`", section))
    assert len(claimed) >= 4, "docs/TOOLCHAIN.md's environment section lost its settings"
    given = pulumi_environment({"HOME": str(tmp_path), "PATH": "/usr/bin"})
    for name, value in claimed.items():
        assert name in given, f"docs/TOOLCHAIN.md says scripts/env.sh sets {name}; it does not"
        if "~" in value:  # a path shown in its default form: ~/.cache/trainstack/... (or TRAINSTACK_CACHE)
            tail = value.removeprefix("~/.cache/trainstack")
            assert given[name].endswith(tail), f"{name}: docs {value}, env {given[name]}"
        else:
            assert given[name] == value, f"{name}: docs {value}, env.sh {given[name]}"


def test_architectures_layers_are_the_import_contracts() -> None:
    """The layers table, top to bottom, is pyproject.toml's `layers` contract (the code that holds it)."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    declared = [sorted(re.split(r"\s*[:|]\s*", layer)) for layer in layers]
    lines = (DOCS / "ARCHITECTURE.md").read_text().splitlines()
    start = lines.index("| layer | parts | siblings |")
    shown = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        parts = line.split("|")[2].split("(")[0]  # "(and the program, `__main__.py`)" is no package
        shown.append(sorted(re.findall(r"`(\w+)`", parts)))
    assert shown == declared, "docs/ARCHITECTURE.md's layers table and pyproject.toml's contract differ"


def test_the_demos_training_pace_is_what_operating_says() -> None:
    """ "about five minutes a run, checkpointing every 100 steps and syncing to the bucket every 30 s"."""
    text = _flat(DOCS / "OPERATING.md")
    claim = re.search(r"about (\w+) minutes a run, checkpointing every (\d+) steps .* every (\d+) s \(", text)
    assert claim, "docs/OPERATING.md no longer states the demo's pace"
    minutes = {"four": 4, "five": 5, "six": 6}[claim[1]]
    named = "`demo_node_env` in `localcloud/servers.py`" in text
    assert named, "docs/OPERATING.md no longer names where the demo's settings are"
    home = inspect.getsource(demo_node_env)

    def default(name: str) -> float:
        found = re.search(rf"{name}\D{{0,40}}?(\d+(?:\.\d+)?)", home)
        assert found, f"the demo's node settings no longer set {name}"
        return float(found[1])

    assert default("TRAINSTACK_CHECKPOINT_EVERY") == float(claim[2])
    assert default("TRAINSTACK_CHECKPOINT_INTERVAL_S") == float(claim[3])
    sleeping_s = default("TRAINSTACK_STEPS") * default("TRAINSTACK_STEP_SLEEP_S")
    assert (minutes - 1) * 60 <= sleeping_s <= minutes * 60, f"{sleeping_s:g} s of steps is not {minutes} min"


def test_team_budget_shows_the_shipped_team_file(tmp_path: Path) -> None:
    """docs/TEAM-BUDGET.md's example loads through the one reader and says what stacks/team.yaml says."""
    block = re.search(r"```yaml\n(.*?)```", (DOCS / "TEAM-BUDGET.md").read_text(), re.S)
    assert block, "docs/TEAM-BUDGET.md lost its team file"
    shown = tmp_path / "team.yaml"
    shown.write_text(block[1])
    assert load_team(shown) == load_team(), "docs/TEAM-BUDGET.md's team file and stacks/team.yaml differ"
