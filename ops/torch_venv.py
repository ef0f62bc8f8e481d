"""The torch venv that CPU test nodes run (torchrun, train/train.py, the start script's boto3 helper).

Exactly the `node` dependency group of uv.lock (pyproject.toml names it; the lock is the one place its
versions are written), installed with uv, cached outside the repo and keyed by what the lock pins for it:
`<cache>/torch-venv-<hash>`, linked as `<cache>/torch-venv`, the path tests/hosts and the local RunPod's nodes
use. A second run finds it and returns at once; uv's cache keeps the wheels.

`scripts/bootstrap --with-torch` runs it (through `scripts/bootstrap-torch`, passing `TRAINSTACK_UV`) beside
its uv sync, before `.venv` exists: so this module is standard library only and runs on the machine's Python.
Its lines `bootstrap-torch: installing the node group (...)` and `bootstrap-torch: torch ... ready` are read
by scripts/bootstrap's progress report.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from common.cachedir import cache_dir
from common.errors import TrainstackError

PROG = "scripts/bootstrap-torch"
REPO = Path(__file__).resolve().parents[1]
LINK = "torch-venv"
REQ_MARKER = ".trainstack-req"  # holds the hash of the export a venv was brought to
BYTECODE_MARKER = ".trainstack-bytecode"  # holds the hash its packages were compiled for


class TorchVenvError(TrainstackError):
    """The torch venv cannot be installed; the message says why and what to do."""


@dataclass(frozen=True)
class NodeGroup:
    """What uv.lock pins for the `node` group: the requirements, their cache key and the torch version."""

    requirements: str
    key: str
    torch: str


def node_group(requirements: str) -> NodeGroup:
    """The export's cache key (the first 12 hex digits of the sha256 of its lines that are not comments, each
    ending in a newline) and its pinned torch version (without a local build tag's environment marker)."""
    lines = [line + "\n" for line in requirements.splitlines() if not line.startswith("#")]
    key = hashlib.sha256("".join(lines).encode()).hexdigest()[:12]
    pinned = re.search(r"^torch==([^ ;\n]*)", requirements, re.MULTILINE)
    if pinned is None:
        raise TorchVenvError(
            "uv.lock's node group pins no torch (torch==...): add torch to it in pyproject.toml"
        )
    return NodeGroup(requirements, key, pinned.group(1))


def _marker(venv: Path, name: str) -> str:
    try:
        return (venv / name).read_text().strip()
    except OSError:
        return ""


def satisfied(venv: Path, group: NodeGroup) -> bool:
    """The venv was brought to this very export (its marker holds the key), has torchrun and the pinned torch
    (a local build such as +cu132 counts)."""
    if not os.access(venv / "bin" / "torchrun", os.X_OK) or _marker(venv, REQ_MARKER) != group.key:
        return False
    return installed_torch(venv) == group.torch


def installed_torch(venv: Path) -> str | None:
    """The torch version installed in `venv`, from its distribution's metadata (the `Version:` line that pip
    and uv write), without its local build (+cu132); None when there is none. Read, not imported: importing
    torch costs 2-3 CPU-seconds, and every `scripts/up` on the local RunPod asks."""
    for meta in sorted(venv.glob("lib/python*/site-packages/torch-*.dist-info/METADATA")):
        try:
            lines = meta.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("Version:"):
                return line.removeprefix("Version:").strip().split("+")[0]
            if not line:
                break  # the headers end at the first blank line
    return None


def _bytecode(venv: Path, group: NodeGroup) -> None:
    """Compile the venv's packages once (scripts/bootstrap says why), also in a venv installed before the
    installs compiled them; a failure to compile is no failure to install."""
    if _marker(venv, BYTECODE_MARKER) != group.key:
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", str(venv / "lib")],
            capture_output=True,
            check=False,
        )
        (venv / BYTECODE_MARKER).write_text(group.key + "\n")


def _run(what: str, argv: Sequence[str], env: Mapping[str, str]) -> None:
    done = subprocess.run(list(argv), cwd=REPO, env=dict(env), check=False)
    if done.returncode != 0:
        raise TorchVenvError(f"{what} failed (exit {done.returncode}); its output is above")


def _export(uv: str, req: Path, env: Mapping[str, str]) -> NodeGroup:
    argv = [uv, "export", "--frozen", "--only-group", "node", "--no-hashes", "--no-emit-project"]
    _run("uv export of uv.lock's node group", [*argv, "--quiet", "-o", str(req)], env)
    return node_group(req.read_text())


def _link(link: Path, venv: Path) -> None:
    """Point `link` at `venv` in one rename, as `ln -sfn` does."""
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(venv)
    os.replace(tmp, link)


def ensure(env: Mapping[str, str] | None = None, *, quiet: bool = False) -> Path:
    """Install (or find) the torch venv for uv.lock's node group and return its link; raise TorchVenvError."""
    env = os.environ if env is None else env

    def say(line: str) -> None:
        if not quiet:
            print(f"bootstrap-torch: {line}", file=sys.stderr)

    uv = env.get("TRAINSTACK_UV") or "uv"
    if shutil.which(uv) is None:
        raise TorchVenvError("uv is missing; run scripts/bootstrap --with-torch (it installs uv)")
    cache = cache_dir(env)
    cache.mkdir(parents=True, exist_ok=True)
    req = cache / f"node-requirements.{os.getpid()}.txt"
    try:
        return _ensure(env, uv, cache / LINK, _export(uv, req, env), req, say)
    finally:
        req.unlink(missing_ok=True)


def _ensure(
    env: Mapping[str, str], uv: str, link: Path, group: NodeGroup, req: Path, say: Callable[[str], None]
) -> Path:
    if satisfied(link, group):
        _bytecode(link.resolve(), group)
        say(f"torch {group.torch} ready in {link}")
        return link
    if link.exists() and not link.is_symlink():
        raise TorchVenvError(f"{link} is a directory without torch {group.torch}; move it away and run again")
    # A venv the link already points at is brought up to the lock in place: uv installs only what differs (for
    # a new node package, seconds), where a fresh venv would download torch and its CUDA libraries again.
    venv = link.with_name(f"{LINK}-{group.key}")
    if os.access(link / "bin" / "python", os.X_OK) and not satisfied(venv, group):
        venv = link.resolve()
    if not satisfied(venv, group):
        if not os.access(venv / "bin" / "python", os.X_OK):
            print(
                f"bootstrap-torch: installing the node group (torch {group.torch}) into {venv} "
                "(first run only: minutes)",
                file=sys.stderr,
            )
            # Built in place (a venv's scripts name its path: it cannot be moved); the marker says it is done.
            shutil.rmtree(venv, ignore_errors=True)
            python = env.get("TRAINSTACK_PYTHON") or "python3"
            _run(f"uv venv {venv}", [uv, "venv", "--quiet", "--python", python, str(venv)], env)
        install = [uv, "pip", "install", "--compile-bytecode", "--python", str(venv / "bin" / "python")]
        offline = {**env, "UV_PYTHON_DOWNLOADS": "never"}
        _run("uv pip install of the node group", [*install, "-r", str(req)], offline)
        (venv / REQ_MARKER).write_text(group.key + "\n")
        # uv compiled what it installed (--compile-bytecode): a compileall walk of its ~6,000 files after it
        # found nothing to do and cost ~5 CPU-s (issue #47).
        (venv / BYTECODE_MARKER).write_text(group.key + "\n")
    _link(link, venv)
    _bytecode(venv, group)
    say(f"torch {group.torch} ready in {link}")
    return link


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Install the torch venv CPU test nodes run: uv.lock's node group, cached by its pins.",
    )
    parser.add_argument("--quiet", action="store_true", help="say nothing when there is nothing to do")
    options = parser.parse_args(argv)
    try:
        ensure(quiet=options.quiet)
    except TorchVenvError as exc:
        print(f"bootstrap-torch: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
