"""Drive the real Pulumi CLI through report scenarios, and record their JSON as scrubbed fixtures.

`python -m tests.report.scenarios` re-records `tests/report/fixtures/<scenario>/` from the small program in
`tests/report/program` (real CLI, real policy pack, no network). The e2e tests use the same scenarios.
`python -m tests.report.scenarios --real [STACK...]` records the trainstack program itself (`REAL_SCENARIOS`)
into `fixtures/real-<stack>/`, each in a throwaway workspace and backend on a fresh local RunPod and moto
that it starts and stops itself.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.local import FAST_ARGS, LocalRunPod, start_local_runpod, start_moto_s3
from harness.pulumi_cli import REPO, Pulumi
from report.cli import PulumiRunner
from tests.e2e.stacks import StackRun, open_stack

PROGRAM = REPO / "tests/report/program"
FIXTURES = REPO / "tests/report/fixtures"
HF_TOKEN = "hf_reportTESTvalue0123456789abcdefghijkl"  # a fake value the report must never print
PLAIN_SCENARIO = "search-shrink"
_VOLATILE = ("sourcePosition", "stackTrace", "propertyDependencies")


@dataclass(frozen=True)
class Scenario:
    """A stack brought to a `before` config with `pulumi up`, then previewed at the `after` config."""

    name: str
    stack: str  # also picks policy/config/<stack>.json
    before: dict[str, str] | None  # None: the stack is never deployed (everything is a create)
    after: dict[str, str]


SCENARIOS = (
    Scenario("prod-scale-up", "prod", {"nodes": "4"}, {"nodes": "8"}),
    Scenario("prod-over-budget", "prod", {"nodes": "4"}, {"nodes": "12"}),
    Scenario("dev-create", "dev", None, {"nodes": "1", "topology": "pods", "max_run_hours": "2"}),
    Scenario(
        "search-shrink",
        "search",
        {"nodes": "3", "topology": "pods", "max_run_hours": "6", "volume_gb": "500"},
        {
            "nodes": "2",
            "topology": "pods",
            "max_run_hours": "6",
            "volume_gb": "500",
            "data_center": "EU-RO-1",
        },
    ),
)


def project_copy(where: Path) -> Path:
    """A copy of the small program (stack config files never land in the repo)."""
    project = where / "program"
    shutil.copytree(PROGRAM, project, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
    (project / "Pulumi.yaml").write_text(
        (PROGRAM / "Pulumi.yaml").read_text().replace("../../../.venv", str(REPO / ".venv"))
    )
    return project


def prepare(scenario: Scenario, where: Path) -> tuple[Pulumi, PulumiRunner]:
    """Deploy the `before` side, set the `after` config; return the CLI and a report runner bound to it."""
    cli = Pulumi(project=project_copy(where), state=where / "state")
    cli.stack_init(scenario.stack)
    cli.run("config", "set", "--secret", "hf_token", HF_TOKEN)
    if scenario.before is not None:
        set_config(cli, scenario.before)
        cli.run("up", "--yes", "--skip-preview")
    set_config(cli, scenario.after, drop=scenario.before)
    runner = PulumiRunner(
        cwd=cli.project,
        policy_pack=REPO / "policy",
        policy_config_dir=policy_configs(where),
        env=cli.env(),
        create_missing=False,
    )
    return cli, runner


def policy_configs(where: Path) -> Path:
    """The shipped policy configs, plus each stack's one run cap as `run-cost-limit.max_run_usd`: this
    program has no H100Cluster to carry `trainstack:run.max_cost_usd` to the policies (policy/rules/common.py
    `stack_run_cap`), so the policy's own key stands in for the cap the shipped stack file sets."""
    out = where / "policy-config"
    out.mkdir(exist_ok=True)
    for shipped in sorted((REPO / "policy/config").glob("*.json")):
        config = json.loads(shipped.read_text())
        stack = yaml.safe_load((REPO / f"stacks/Pulumi.{shipped.stem}.yaml").read_text())["config"]
        cap = (stack.get("trainstack:run") or {}).get("max_cost_usd")
        if cap:
            config.setdefault("run-cost-limit", {})["max_run_usd"] = cap
        (out / shipped.name).write_text(json.dumps(config))
    return out


def set_config(cli: Pulumi, values: dict[str, str], drop: dict[str, str] | None = None) -> None:
    for key in set(drop or {}) - set(values):
        cli.run("config", "rm", key)
    for key, value in values.items():
        cli.run("config", "set", key, value)


def scrub(text: str, where: Path) -> str:
    """Machine-specific paths, times and ids out; ciphertexts out (they hold only the fake token)."""
    # (Only the home's cache: a bare home like /root also appears in the nodes' own paths.)
    for path, placeholder in ((where, "<tmp>"), (REPO, "<repo>"), (Path.home() / ".cache", "<home>/.cache")):
        text = text.replace(str(path), placeholder)
    text = re.sub(r'"(created|modified)": "[^"]+"', r'"\1": "2026-01-01T00:00:00Z"', text)
    text = re.sub(r'"timestamp": \d+', '"timestamp": 0', text)
    text = re.sub(r'"ciphertext": "[^"]+"', '"ciphertext": "[scrubbed]"', text)
    return re.sub(r"::default::[0-9a-f-]{36}", "::default::00000000-0000-0000-0000-000000000000", text)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _keep(event: dict[str, Any]) -> bool:
    diag = event.get("diagnosticEvent")
    return not (diag and diag.get("severity") == "debug")


def record(scenario: Scenario, out: Path, log: Callable[[str], None] = print) -> None:
    with tempfile.TemporaryDirectory(prefix="report-rec-") as tmp:
        where = Path(tmp)
        cli, runner = prepare(scenario, where)
        state = runner.export(scenario.stack)
        events = [json.loads(line) for line in runner.preview_events(scenario.stack) if line.strip()]
        out.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(_strip(e), sort_keys=True) for e in events if _keep(e)]
        (out / f"{scenario.stack}.events.jsonl").write_text(scrub("\n".join(lines) + "\n", where))
        if state is not None:
            body = json.dumps(_strip(state), indent=1, sort_keys=True) + "\n"
            (out / f"{scenario.stack}.export.json").write_text(scrub(body, where))
        if scenario.name == PLAIN_SCENARIO:
            # The plain form too (no policy results in it), to keep its parser honest.
            plain = cli.run("preview", "--stack", scenario.stack, "--json", check=False).stdout
            body = json.dumps(_strip(json.loads(plain)), indent=1, sort_keys=True) + "\n"
            (out / f"{scenario.stack}.preview.json").write_text(scrub(body, where))
        log(f"recorded {scenario.name}: {len(lines)} events -> {out.relative_to(REPO)}")
        del cli


@dataclass(frozen=True)
class RealScenario:
    """The trainstack program's own `stack` in a throwaway workspace on a fresh local RunPod and moto.

    `before` (`pulumi config set --path` keys) is set and deployed first; None: never deployed (a first
    preview, everything a create). `after` is set before the preview (empty: the shipped config as is).
    """

    stack: str
    before: dict[str, str] | None
    after: dict[str, str] = field(default_factory=dict)


NODES = "trainstack:cluster.nodes"
REAL_SCENARIOS = (
    RealScenario("dev", None),
    RealScenario("search", None),
    # stacks/Pulumi.prod.yaml ships 8 nodes: deploy 4, then preview the shipped 8.
    RealScenario("prod", {NODES: "4"}, {NODES: "8"}),
)


def set_path_config(run: StackRun, values: dict[str, str]) -> None:
    for key, value in values.items():
        run.cli.run("config", "set", "--path", "--stack", run.stack, key, value)


def prepare_real(
    scenario: RealScenario, where: Path, runpod: LocalRunPod, s3_endpoint: str
) -> tuple[StackRun, PulumiRunner]:
    """Open the shipped stack (demo secrets, declared spend limit), deploy `before`, set `after`."""
    run = open_stack(scenario.stack, where, runpod, s3_endpoint)
    if scenario.before is not None:
        set_path_config(run, scenario.before)
        run.up()
    set_path_config(run, scenario.after)
    runner = PulumiRunner(
        cwd=run.cli.project,
        policy_pack=REPO / "policy",
        policy_config_dir=REPO / "policy/config",
        env=run.cli.env(),
        create_missing=False,
    )
    return run, runner


def scrub_real(text: str, where: Path) -> str:
    """`scrub`, plus the servers' loopback ports (a new pair every recording)."""
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", scrub(text, where))


def record_real(
    scenario: RealScenario, runpod: LocalRunPod, s3_endpoint: str, log: Callable[[str], None] = print
) -> None:
    """Record the trainstack program's preview of `scenario` into `fixtures/real-<stack>/`."""
    out = FIXTURES / f"real-{scenario.stack}"
    with tempfile.TemporaryDirectory(prefix="report-real-") as tmp:
        where = Path(tmp)
        _, runner = prepare_real(scenario, where, runpod, s3_endpoint)
        state = runner.export(scenario.stack)
        events = [json.loads(line) for line in runner.preview_events(scenario.stack) if line.strip()]
        out.mkdir(parents=True, exist_ok=True)
        for stale in out.iterdir():
            stale.unlink()
        lines = [json.dumps(_strip(e), sort_keys=True) for e in events if _keep(e)]
        (out / f"{scenario.stack}.events.jsonl").write_text(scrub_real("\n".join(lines) + "\n", where))
        if state is not None:
            body = json.dumps(_strip(state), indent=1, sort_keys=True) + "\n"
            (out / f"{scenario.stack}.export.json").write_text(scrub_real(body, where))
    log(f"recorded the real {scenario.stack} preview: {len(lines)} events -> {out.relative_to(REPO)}")


def record_all_real(stacks: list[str]) -> None:
    """A fresh local RunPod and moto for this recording only; both are stopped afterwards."""
    chosen = [s for s in REAL_SCENARIOS if not stacks or s.stack in stacks]
    unknown = set(stacks) - {s.stack for s in REAL_SCENARIOS}
    if unknown:
        raise SystemExit(
            f"no real scenario for {sorted(unknown)}; known: {[s.stack for s in REAL_SCENARIOS]}"
        )
    with tempfile.TemporaryDirectory(prefix="report-real-servers-") as tmp:
        runpod = start_local_runpod(Path(tmp) / "runpod", *FAST_ARGS)
        try:
            moto = start_moto_s3(Path(tmp) / "moto.log")
            try:
                for scenario in chosen:
                    runpod.admin.reset()
                    record_real(scenario, runpod, moto.endpoint_url)
            finally:
                moto.stop()
        finally:
            runpod.stop()


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--real"]:
        record_all_real(args[1:])
    else:
        for s in SCENARIOS:
            if not args or s.name in args:
                record(s, FIXTURES / s.name)
