"""The one door to the Pulumi CLI: its offline environment, the one runner, and the one reader of
`pulumi config --json` (secrets dropped, one way). Standard library only, so every layer above may use it.

Everything that runs `pulumi` goes through `run` (tests/test_doors.py holds that); `environment` is the
rule scripts/env.sh states for a shell (the Pulumi CLI scripts/bootstrap built, no update check, no plugin
downloads, the local file backend unless PULUMI_BACKEND_URL says otherwise, and a passphrase only for that
local demo backend).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from common.cachedir import cache_dir
from common.errors import TrainstackError

REPO = Path(__file__).resolve().parents[1]
# A fixed passphrase is fine for the local demo stacks, whose secrets are local test values, and only there.
DEMO_PASSPHRASE = "trainstack-local-demo"  # noqa: S105


class PulumiError(TrainstackError):
    """A `pulumi` command failed; the message names the command and Pulumi's last line."""


def default_backend(repo: Path = REPO) -> str:
    return f"file://{repo / '.state' / 'pulumi'}"


def environment(base: Mapping[str, str] | None = None, repo: Path = REPO) -> dict[str, str]:
    """`base` (default: this process's environment) with the Pulumi settings of scripts/env.sh."""
    env = dict(os.environ if base is None else base)
    cache = cache_dir(env)
    prefix = f"{cache / 'bin'}:{repo / '.venv' / 'bin'}"
    path = env.get("PATH", "")
    env["TRAINSTACK_ROOT"] = str(repo)
    env["PATH"] = path if path.startswith(prefix) else f"{prefix}:{path}"
    env.setdefault("PULUMI_HOME", str(cache / "pulumi-home"))
    env["PULUMI_SKIP_UPDATE_CHECK"] = "true"
    env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] = "true"
    env["PULUMI_CREDENTIAL_STORE"] = "plaintext"
    env["PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK"] = "true"
    # Dynamic providers run from this venv and import providers/ by module path from any directory.
    env["PULUMI_RUNTIME_VIRTUALENV"] = str(repo / ".venv")
    pythonpath = env.get("PYTHONPATH", "")
    if str(repo) not in pythonpath.split(":"):
        env["PYTHONPATH"] = f"{repo}:{pythonpath}" if pythonpath else str(repo)
    # Resource operations are waits on RunPod: as many at once as the dynamic-provider host serves.
    env.setdefault("PULUMI_PARALLEL", "64")
    if not env.get("PULUMI_BACKEND_URL"):
        (repo / ".state" / "pulumi").mkdir(parents=True, exist_ok=True)
        env["PULUMI_BACKEND_URL"] = default_backend(repo)
    if env["PULUMI_BACKEND_URL"] == default_backend(repo) and "PULUMI_CONFIG_PASSPHRASE" not in env:
        env["PULUMI_CONFIG_PASSPHRASE"] = DEMO_PASSPHRASE
    return env


def command(
    args: Sequence[str],
    *,
    stack: str | None = None,
    cwd: Path | None = None,
    interactive: bool = False,
    binary: str = "pulumi",
) -> list[str]:
    """The argv of one `pulumi` command: `--stack`, `--cwd` and `--non-interactive` added as asked.
    `binary`: another program in Pulumi's place (a test's recorded CLI)."""
    argv = [binary, *args]
    if stack is not None:
        argv += ["--stack", stack]
    if cwd is not None:
        argv += ["--cwd", str(cwd)]
    if not interactive:
        argv.append("--non-interactive")
    return argv


def run(
    args: Sequence[str],
    *,
    stack: str | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = False,
    capture: bool = True,
    stdin: str | None = None,
    timeout: float | None = None,
    interactive: bool = False,
    binary: str = "pulumi",
) -> subprocess.CompletedProcess[str]:
    """Run `pulumi ARGS` (text mode). `check`: raise PulumiError naming the command when it fails.
    `capture=False` leaves stdout and stderr to the terminal (Pulumi's own progress and prompts)."""
    argv = command(args, stack=stack, cwd=cwd, interactive=interactive, binary=binary)
    # OSError (no pulumi on PATH, no such folder) and TimeoutExpired reach the caller, which names them.
    done = subprocess.run(
        argv,
        env=dict(env) if env is not None else None,
        capture_output=capture,
        input=stdin,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and done.returncode != 0:
        last = ((done.stderr or "").strip().splitlines() or ["no output"])[-1]
        raise PulumiError(f"`pulumi {' '.join(args[:2])}` failed ({done.returncode}): {last}")
    return done


def replace_process(args: Sequence[str], env: Mapping[str, str]) -> NoReturn:
    """Become `pulumi ARGS` (its terminal, its prompts, its exit code): `trainstack pulumi`."""
    os.execvpe("pulumi", command(args, interactive=True), dict(env))  # noqa: S606


def run_json(args: Sequence[str], **kwargs: Any) -> Any:
    """`run(..., check=True)` and its stdout decoded as JSON; PulumiError when it is not JSON."""
    done = run(args, check=True, **kwargs)
    try:
        return json.loads(done.stdout or "null")
    except ValueError:
        raise PulumiError(f"`pulumi {' '.join(args[:2])}` printed no JSON") from None


def plain_config(entries: Mapping[str, Any]) -> dict[str, Any]:
    """`pulumi config --json`'s entries as `key -> value`, secrets dropped: the one rule for that."""
    return {
        key: entry.get("objectValue", entry.get("value"))
        for key, entry in entries.items()
        if isinstance(entry, dict) and not entry.get("secret")
    }


def config_entries(
    stack: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 60
) -> dict[str, Any]:
    """`pulumi config --json` of the stack in `cwd` as Pulumi prints it (`key -> {value, secret, ...}`;
    a secret's value is not shown without --show-secrets); PulumiError when it cannot be read."""
    entries = run_json(["config", "--json"], stack=stack, cwd=cwd, env=env, timeout=timeout)
    if not isinstance(entries, dict):
        raise PulumiError(f"`pulumi config --json` of '{stack}' is not a JSON object")
    return entries


def config(
    stack: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 60
) -> dict[str, Any]:
    """The stack's config as Pulumi resolves it in `cwd`, secrets dropped; PulumiError when unreadable."""
    return plain_config(config_entries(stack, cwd, env, timeout))


def exports(base: Mapping[str, str]) -> str:
    """`environment(base)`'s changes as shell `export` lines: what `. scripts/env.sh` evaluates."""
    changed = {k: v for k, v in environment(base).items() if base.get(k) != v}
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in sorted(changed.items()))


if __name__ == "__main__":
    print(exports(os.environ), end="")
