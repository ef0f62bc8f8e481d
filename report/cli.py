"""`scripts/preview-report`: preview stacks with the policy pack and report changes, cost and violations.

The layers: `preview_report_parse` turns the CLI's JSON into records, `preview_report_render` turns
records into Markdown/JSON (both pure); this module only runs the CLI (a thin `Runner`) and wires the
command line. Exit status: 0 clean, 1 some mandatory policy violation, 2 a preview that failed otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from common.pulumi import PulumiError
from common.stack import Stack
from common.stackname import stack_name_problem
from policy.config_file import OVERRIDE_ENV, problems_in
from report.parse import (
    PreviewParseError,
    ResourceCost,
    export_forecast,
    export_output,
    parse_events,
    parse_export,
)
from report.render import StackReport, build, render_markdown, to_json

REPO = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_MANDATORY, EXIT_FAILED = 0, 1, 2
_STDERR_TAIL = 2000  # characters of the CLI's stderr quoted when it fails


class RunnerError(RuntimeError):
    """The Pulumi CLI could not produce a preview or an export; the message quotes its stderr tail."""


class Runner(Protocol):
    """Where the JSON comes from: the real CLI, or files recorded from it."""

    def preview_events(self, stack: str) -> list[str]: ...

    def export(self, stack: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class PulumiRunner:
    """Runs the Pulumi CLI on PATH in `cwd` (the project root); `env` adds to the process environment."""

    cwd: Path
    policy_pack: Path | None
    policy_config_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    create_missing: bool = True
    timeout_s: float = 1800.0
    # Local RunPod mode: each stack runs from its own workspace (ops/workspace.py), never the repo.
    workspace: Callable[[str], Path] | None = None
    # Called once the stack exists in the backend (local mode: the demo secrets, as scripts/up does).
    prepare_stack: Callable[[str, Path], None] | None = None
    # Prepared once per stack: preparing again would drop what prepare_stack set up.
    _workspaces: dict[str, Path] = field(default_factory=dict, repr=False)

    def _cwd(self, stack: str) -> Path:
        if self.workspace is None:
            return self.cwd
        if stack not in self._workspaces:
            self._workspaces[stack] = self.workspace(stack)
        return self._workspaces[stack]

    def _stack(self, stack: str) -> Stack:
        return Stack(stack, self._cwd(stack), env={**os.environ, **self.env}, timeout=self.timeout_s)

    def export(self, stack: str) -> dict[str, Any] | None:
        """The stack's state, or None for a stack that does not exist yet (then it is created empty)."""
        client = self._stack(stack)
        state: dict[str, Any] | None = None
        try:
            if stack in client.stacks():
                state = dict(client.export().exported)
            elif self.create_missing:
                client.init()
        except PulumiError as exc:
            raise RunnerError(str(exc)) from None
        if state is None and not self.create_missing:
            raise RunnerError(f"stack {stack!r} does not exist; create it with `pulumi stack init {stack}`")
        if self.prepare_stack:
            self.prepare_stack(stack, self._cwd(stack))
        return state

    def preview_events(self, stack: str) -> list[str]:
        args = ["--json"]
        if self.policy_pack is not None:
            config = self.policy_config_dir / f"{stack}.json"
            args += ["--policy-pack", str(self.policy_pack)]
            if config.exists():
                # The CLI's own errors for a bad file name nothing; ours name the file, key and fix.
                allow = os.environ.get(OVERRIDE_ENV) == "1"
                problems = problems_in(config.read_text(), allow_unenforced_budget=allow)
                if problems:
                    raise RunnerError("; ".join(f"{config}: {p}" for p in problems))
                args += ["--policy-pack-config", str(config)]
        # Only the streaming form carries policy results; the plain --json form drops them.
        streaming = {"PULUMI_ENABLE_STREAMING_JSON_PREVIEW": "true"}
        proc = self._stack(stack).preview(*args, extra_env=streaming)
        lines = proc.output.splitlines()
        if not any('"summaryEvent"' in line for line in lines):
            raise RunnerError(
                f"`pulumi preview --stack {stack}` ended ({proc.code}) without a summary: "
                f"{proc.errors[-_STDERR_TAIL:].strip()}"
            )
        return lines


@dataclass(frozen=True)
class RecordedRunner:
    """Reads `<stack>.events.jsonl` and `<stack>.export.json` (optional) recorded from the real CLI."""

    directory: Path

    def preview_events(self, stack: str) -> list[str]:
        return (self.directory / f"{stack}.events.jsonl").read_text().splitlines()

    def export(self, stack: str) -> dict[str, Any] | None:
        path = self.directory / f"{stack}.export.json"
        return json.loads(path.read_text()) if path.exists() else None


def local_workspace(stack: str) -> Path:
    """The stack's local-RunPod workspace (`.state/local/<stack>/`), as scripts/up uses it."""
    from ops.workspace import prepare  # only local mode needs it

    return prepare(stack)


def local_demo(stack: str, workspace: Path) -> None:
    """scripts/up's local setup of a stack (demo secret values, the account spend limit it declares)."""
    proc = subprocess.run(
        [sys.executable, "-m", "ops.local_demo", stack, str(workspace)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise RunnerError(f"ops.local_demo {stack} failed: {proc.stderr[-_STDERR_TAIL:].strip()}")


def report_stack(runner: Runner, stack: str) -> StackReport:
    """Before from the state, after and violations from the preview, as one record."""
    state = runner.export(stack)
    before: tuple[ResourceCost, ...] = parse_export(state) if state else ()
    forecast = export_forecast(state) if state else None
    alerts = export_output(state, "alerts") if state else None
    return build(stack, parse_events(runner.preview_events(stack)), before, forecast, alerts)


def exit_code(reports: Sequence[StackReport]) -> int:
    if any(r.mandatory for r in reports):
        return EXIT_MANDATORY
    if any(r.preview.failed for r in reports):
        return EXIT_FAILED
    return EXIT_OK


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/preview-report",
        description="Preview stacks with the policy pack; print a Markdown report of changes, cost, policy.",
    )
    p.add_argument("stacks", nargs="+", metavar="STACK", help="stack names, e.g. dev search prod")
    p.add_argument("--out", type=Path, help="write the Markdown here instead of stdout")
    p.add_argument("--json-out", type=Path, help="also write the report data as JSON here")
    p.add_argument("--cwd", type=Path, default=REPO, help="the Pulumi project directory (default: repo root)")
    p.add_argument("--policy-pack", type=Path, default=REPO / "policy", help="policy pack directory")
    p.add_argument("--no-policy", action="store_true", help="preview without the policy pack")
    p.add_argument(
        "--policy-config-dir",
        type=Path,
        default=REPO / "policy/config",
        help="holds <stack>.json, passed as --policy-pack-config",
    )
    p.add_argument(
        "--recorded", type=Path, help="read <stack>.events.jsonl/<stack>.export.json here; run nothing"
    )
    p.add_argument("--no-create", action="store_true", help="fail on a missing stack instead of creating it")
    p.add_argument(
        "--local",
        action="store_true",
        help="local RunPod: run each stack from its .state/local/<stack> workspace (the wrapper sets it)",
    )
    # The wrapper checks the names before it starts a local RunPod: exit 0 when all are valid, else 2.
    p.add_argument("--names-only", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    bad_names = [p for stack in args.stacks if (p := stack_name_problem(stack)) is not None]
    for problem in bad_names:  # before any name becomes a path (common/stackname.py)
        print(f"preview-report: {problem}", file=sys.stderr)
    if bad_names or args.names_only:
        return EXIT_FAILED if bad_names else 0
    runner: Runner
    if args.recorded:
        runner = RecordedRunner(args.recorded)
    else:
        runner = PulumiRunner(
            cwd=args.cwd.resolve(),
            policy_pack=None if args.no_policy else args.policy_pack.resolve(),
            policy_config_dir=args.policy_config_dir.resolve(),
            create_missing=not args.no_create,
            workspace=local_workspace if args.local else None,
            prepare_stack=local_demo if args.local else None,
        )
    try:
        reports = [report_stack(runner, stack) for stack in args.stacks]
    except (RunnerError, PreviewParseError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"preview-report: {exc}", file=sys.stderr)
        return EXIT_FAILED
    markdown = render_markdown(reports)
    if args.out:
        args.out.write_text(markdown)
    else:
        sys.stdout.write(markdown)
    if args.json_out:
        args.json_out.write_text(json.dumps(to_json(reports), indent=2) + "\n")
    return exit_code(reports)


if __name__ == "__main__":
    sys.exit(main())
