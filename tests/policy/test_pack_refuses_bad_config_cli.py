"""A bare `pulumi preview --policy-pack policy --policy-pack-config FILE` (no scripts/up, no preview-report)
gets the checker's message for a bad file, whichever way it is bad (issue #49, class 2): a file the CLI
parses is refused by the pack as it starts (policy/config_file.py `refuse_at_start`); one the CLI cannot
parse (not JSON, 1e309) by our language host, which the CLI asks for the program's plugins before it reads
the file (tools/pulumi/langhost/policyconfig.go). Both before the program runs: nothing planned, nothing
created. Real CLI runs, about a second each."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # the real pulumi CLI

REPO = Path(__file__).resolve().parents[2]
FILES = {
    "wrong types": (
        '{"run-cost-within-budget": {"max_run_cost_usd": true}, "no-such-policy": {}}',
        [
            "run-cost-within-budget.max_run_cost_usd: input should be a valid number; write a number",
            "no-such-policy: no policy of that name",
        ],
    ),
    "not json": ("run-cost-limit:\n  max_run_usd: 5\n", ["(file): is YAML, not JSON"]),
    "overflow": (
        '{"hourly-burn-limit": {"max_hourly_usd": 1e309}}',
        ["hourly-burn-limit.max_hourly_usd: numbers"],
    ),
    # Issue #62: tracebacks, from the pack (the CLI reads a byte that is not UTF-8 in a string) and from the
    # checker our language host runs (the CLI cannot parse 200,000 levels; Python's parser raised too).
    "not utf-8": (b'{"hourly-burn-limit": {"max_hourly_usd": 4}, "\xff": {}}', ["(file): is not UTF-8 text"]),
    "nested 200000 deep": ("[" * 200_000 + "]" * 200_000, ["(file): is nested deeper than Python's parser"]),
}  # fmt: skip


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _this_checkouts_hosts() -> Path:
    """The bin folder scripts/bootstrap built from this checkout's tools/pulumi (its key, computed the same
    way). The cache's `bin` link points at whichever checkout on the machine bootstrapped last, and this
    test is about this checkout's language host."""
    tools = REPO / "tools/pulumi"
    parts = [tools / "go.mod", tools / "go.sum", *sorted((tools / "langhost").glob("*.go"))]
    parts += sorted(p for p in (tools / "dynhost").iterdir() if p.is_file())
    key = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()[:12]
    version = next(
        line.split()[1] for line in (tools / "go.mod").read_text().splitlines()
        if line.split()[:1] == ["github.com/pulumi/pulumi/pkg/v3"]
    )  # fmt: skip
    cache = Path(os.environ.get("TRAINSTACK_CACHE") or Path.home() / ".cache/trainstack")
    found = cache / f"pulumi-{version}-{key}" / "bin"
    assert (found / "pulumi-language-python").is_file(), f"{found}: run scripts/bootstrap"
    return found


def test_a_bare_preview_gets_the_checkers_message(tmp_path: Path) -> None:
    # The project as a mirror with its own stacks/: `stack init` writes the stack file's salt there.
    project = tmp_path / "project"
    project.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in ("stacks", ".state", "out", ".git"):
            (project / entry.name).symlink_to(entry)
    (project / "stacks").mkdir()
    (tmp_path / "state").mkdir()
    previews = []
    for case, (text, _) in FILES.items():
        path = _write(tmp_path / f"{case.replace(' ', '-')}.json", text)
        previews.append(
            f"echo '=== {case}'; pulumi preview --stack bad-config --non-interactive "
            f'--policy-pack {REPO}/policy --policy-pack-config {path} 2>&1; echo "rc=$?"'
        )
    script = (
        f". {REPO}/scripts/env.sh && export PULUMI_BACKEND_URL=file://{tmp_path}/state "
        f"PULUMI_CONFIG_PASSPHRASE=x PATH={_this_checkouts_hosts()}:$PATH && "
        "pulumi stack init bad-config --non-interactive >/dev/null && " + "; ".join(previews)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "PULUMI_"))}
    proc = subprocess.run(
        ["bash", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    out = proc.stdout + proc.stderr
    for case, (_, said) in FILES.items():
        section = out.split(f"=== {case}\n", 1)[1].split("=== ", 1)[0]
        path = tmp_path / f"{case.replace(' ', '-')}.json"
        assert "rc=0" not in section, section
        for words in said:
            assert f"{path}: {words}" in section, section
        assert "Traceback" not in section and "Invalid type" not in section and "+ create" not in section


def test_a_bare_preview_in_the_local_demos_workspace_gets_the_checkers_message(tmp_path: Path) -> None:
    """Issue #62: in `.state/local/<stack>` (a Pulumi.yaml whose `main:` is the repo) the language host looked
    for the pack beside Pulumi.yaml, found none, and left Pulumi's own parse error, which names no key."""
    from ops.workspace import prepare

    workspace = prepare("dev", tmp_path / "local")
    (tmp_path / "state").mkdir()
    cases = {case: FILES[case] for case in ("not json", "overflow")}
    previews = []
    for case, (text, _) in cases.items():
        path = _write(tmp_path / f"{case.replace(' ', '-')}.json", text)
        previews.append(
            f"echo '=== {case}'; pulumi preview --stack dev --non-interactive --cwd {workspace} "
            f'--policy-pack {REPO}/policy --policy-pack-config {path} 2>&1; echo "rc=$?"'
        )
    script = (
        f". {REPO}/scripts/env.sh && export PULUMI_BACKEND_URL=file://{tmp_path}/state "
        f"PULUMI_CONFIG_PASSPHRASE=x PATH={_this_checkouts_hosts()}:$PATH && "
        f"pulumi stack init dev --cwd {workspace} --non-interactive >/dev/null && " + "; ".join(previews)
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOD_", "AWS_", "PULUMI_"))}
    proc = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = proc.stdout + proc.stderr
    for case, (_, said) in cases.items():
        section = out.split(f"=== {case}\n", 1)[1].split("=== ", 1)[0]
        path = tmp_path / f"{case.replace(' ', '-')}.json"
        assert "rc=0" not in section, section
        for words in said:
            assert f"{path}: {words}" in section, section
        assert "Traceback" not in section and "+ create" not in section
