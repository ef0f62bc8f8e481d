"""Local demo workspaces: run the trainstack program against the local RunPod without touching tracked files.

Pulumi writes a stack's `encryptionsalt` and secret values into `Pulumi.<stack>.yaml`. For the local RunPod
those belong to this machine only, so `scripts/up` runs Pulumi from `.state/local/<stack>/`: a `Pulumi.yaml`
whose `main:` is the repo (the program is the same) and a copy of `stacks/Pulumi.<stack>.yaml` refreshed on
every run, keeping only the local salt and the local demo secret values. The copy never takes the team's
salt, secrets provider or secret values from the tracked file (they are the team's key's; a second
`encryptionsalt` would fail every local `up` for good), and the local ones never reach the tracked file.
Against the real RunPod the repo itself is the workspace, and the team commits its own salt or secrets
provider.

    python -m ops.workspace STACK [--root DIR]     prints the workspace directory

The target rule and the workspace rule are written here once (`resolve_target`, `workspace_for`): every
command of ops/cli.py that needs a stack's workspace asks them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from common.errors import TrainstackError
from common.loopback import is_loopback_url
from stackconfig import files

REPO = Path(__file__).resolve().parents[1]
_KEPT = re.compile(r"^(encryptionsalt|secretsprovider|encryptedkey):")
REAL_RUNPOD_URL = "https://api.runpod.io"  # providers/settings.py's default: RunPod's own API
LOCAL_ENV = "TRAINSTACK_LOCAL"
LOCAL_KEY = "local-runpod-key"  # emulator/keys.py's DEFAULT_API_KEY (ops/ does not import the emulator)


class TargetConflict(TrainstackError):
    """The shell names the local demo and the real RunPod at once (or the real RunPod with the local demo's
    backend): refused before anything is read. The message is one line naming the variables and the fix."""


@dataclass(frozen=True)
class Target:
    """Where a command acts, decided once from the environment: the local demo (its RunPod on loopback, its
    file backend) or the real RunPod (its URL, the team's backend). `runpod_url` is '' for the local demo
    until its server's address is known (`scripts/local-runpod env`)."""

    local: bool
    runpod_url: str
    backend_url: str  # PULUMI_BACKEND_URL as given ('' = the local demo's file backend, common/pulumi.py)
    why: str  # the variables that decided, for a command's "targeting ..." line


def _is_demo_backend(backend: str, repo: Path) -> bool:
    """Unset, or the file backend common/pulumi.py gives the local demo (`.state/pulumi` in the repo)."""
    if not backend:
        return True
    if not backend.startswith("file://"):
        return False
    return (
        Path(backend.removeprefix("file://")).expanduser().resolve() == (repo / ".state" / "pulumi").resolve()
    )


def resolve_target(env: Mapping[str, str], repo: Path = REPO) -> Target:
    """THE target rule (every command that reads a stack or RunPod asks it, once, before any read):

    - TRAINSTACK_LOCAL=1, a loopback RUNPOD_API_URL, or neither a URL nor a key: the local demo;
    - any other RUNPOD_API_URL, or a RUNPOD_API_KEY with no URL (https://api.runpod.io): the real RunPod;
    - the local demo only with its own backend (PULUMI_BACKEND_URL unset or a `file://` one), the real RunPod
      only with a backend that is not the local demo's (PULUMI_BACKEND_URL set, and not `.state/pulumi`).
    A shell that names both is refused (TargetConflict): TRAINSTACK_LOCAL=1 with a non-loopback URL, the
    real RunPod with the demo's backend (whose stacks have the same names), the local demo with a remote
    backend."""
    url = (env.get("RUNPOD_API_URL") or "").strip()
    forced = env.get(LOCAL_ENV) == "1"
    key = env.get("RUNPOD_API_KEY") or ""
    backend = (env.get("PULUMI_BACKEND_URL") or "").strip()
    if url and not is_loopback_url(url):
        if forced:
            raise TargetConflict(
                f"{LOCAL_ENV}=1 asks for the local demo but RUNPOD_API_URL={_shown(url)} is not loopback "
                f"(the real RunPod): for the local demo unset RUNPOD_API_URL and RUNPOD_API_KEY (or "
                f'eval "$(scripts/local-runpod start)"); for that RunPod unset {LOCAL_ENV}'
            )
        local, runpod_url, why = False, url.rstrip("/"), f"RUNPOD_API_URL={_shown(url)}"
    elif url:
        local, runpod_url, why = True, url.rstrip("/"), f"RUNPOD_API_URL={_shown(url)} (loopback)"
    elif forced:
        local, runpod_url, why = True, "", f"{LOCAL_ENV}=1"
    elif key and key != LOCAL_KEY:
        local, runpod_url, why = (
            False,
            REAL_RUNPOD_URL,
            f"RUNPOD_API_KEY with no RUNPOD_API_URL ({REAL_RUNPOD_URL})",
        )
    else:
        local, runpod_url, why = True, "", "no RUNPOD_API_URL and no RunPod key"
    if not local and _is_demo_backend(backend, repo):
        said = f"PULUMI_BACKEND_URL={_shown(backend)} is" if backend else "no PULUMI_BACKEND_URL means"
        raise TargetConflict(
            f"the real RunPod ({why}) but {said} the local demo's backend, whose stacks have the same names: "
            f"export the team's PULUMI_BACKEND_URL (README, 'The real RunPod'), or for the local demo unset "
            f"RUNPOD_API_URL and RUNPOD_API_KEY"
        )
    if local and backend and not backend.startswith("file://"):
        raise TargetConflict(
            f"the local demo ({why}) but PULUMI_BACKEND_URL={_shown(backend)} is a shared backend (the "
            f"team's stacks have the same names): for the local demo unset PULUMI_BACKEND_URL; for the "
            f"team's stacks export its RUNPOD_API_KEY and unset {LOCAL_ENV} and a loopback RUNPOD_API_URL"
        )
    return Target(local, runpod_url, backend, why)


def _shown(value: str) -> str:
    """A URL as safe to print: no user, password or query (a backend's may carry a token), escaped."""
    try:
        parts = urlsplit(value)
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        text = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else value
    except ValueError:
        text = value
    return ascii(text[:120])[1:-1]


def targets_local(env: Mapping[str, str]) -> bool:
    """`resolve_target(env).local` (raises TargetConflict on a shell that names both)."""
    return resolve_target(env).local


def local_root(env: Mapping[str, str], repo: Path = REPO) -> Path:
    """Where the local RunPod's stacks have their workspaces (TRAINSTACK_LOCAL_WORKSPACES moves them: tests
    run scripts/up in a temporary directory)."""
    return Path(env.get("TRAINSTACK_LOCAL_WORKSPACES") or repo / ".state" / "local")


def workspace_for(stack: str, local: bool, env: Mapping[str, str], repo: Path = REPO) -> Path:
    """The one workspace rule: `.state/local/<stack>` for the local RunPod, the repo for the real one."""
    return local_root(env, repo) / stack if local else repo


def _project_file(repo: Path) -> str:
    project = yaml.safe_load((repo / "Pulumi.yaml").read_text())
    runtime = project["runtime"]
    runtime.setdefault("options", {})["virtualenv"] = str(repo / ".venv")
    project["main"] = str(repo)
    project["stackConfigDir"] = "stacks"
    header = "# Generated by ops/workspace.py for the local RunPod; edit the repo's Pulumi.yaml instead.\n"
    return header + yaml.safe_dump(project, sort_keys=False)


def _local_only_lines(stack_file: Path) -> list[str]:
    """The salt and secret-provider lines Pulumi wrote into an earlier copy: local state, kept."""
    if not stack_file.exists():
        return []
    return [line for line in stack_file.read_text().splitlines() if _KEPT.match(line)]


def prepare(stack: str, root: Path | None = None, repo: Path = REPO) -> Path:
    """Create or refresh the local workspace of `stack` (under `root`, default `local_root`); its folder."""
    root = local_root(os.environ, repo) if root is None else root
    source = files.stack_file(
        stack, repo / "stacks"
    )  # UnknownStackError (bad input) names the stacks there are
    workspace = root / stack
    (workspace / "stacks").mkdir(parents=True, exist_ok=True)
    (workspace / "Pulumi.yaml").write_text(_project_file(repo))
    target = files.stack_path(stack, workspace / "stacks")
    kept = _local_only_lines(target)
    target.write_text(_without_team_secrets(source.read_text()) + "".join(f"{line}\n" for line in kept))
    return workspace


def _without_team_secrets(text: str) -> str:
    """A tracked stack file as the local demo may use it: without the team's salt, secrets provider and
    `secure:` values (encrypted with the team's key; the demo sets its own placeholders)."""
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        return text.rstrip("\n") + "\n"  # not a map: Pulumi names the problem itself
    if not (set(doc) & {"encryptionsalt", "secretsprovider", "encryptedkey"} or "secure" in text):
        return text.rstrip("\n") + "\n"  # nothing of the team's: the file as written, comments kept
    kept = {k: v for k, v in doc.items() if not _KEPT.match(f"{k}:")}
    if isinstance(kept.get("config"), dict):
        kept["config"] = _scrubbed(kept["config"])
    header = "# The tracked stack file, less the team's salt and secret values (ops/workspace.py).\n"
    return header + yaml.safe_dump(kept, sort_keys=False)


def _scrubbed(value: object) -> object:
    if isinstance(value, dict):
        return {k: _scrubbed(v) for k, v in value.items() if not (isinstance(v, dict) and "secure" in v)}
    if isinstance(value, list):
        return [_scrubbed(v) for v in value if not (isinstance(v, dict) and "secure" in v)]
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.workspace", description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        print(prepare(args.stack, args.root))
    except files.UnknownStackError as err:
        raise SystemExit(str(err)) from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
