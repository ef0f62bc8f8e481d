"""`delivery:NodeFiles`: copy a node's artifacts to it over SSH and (re)start its start script, detached.

Contract (Pulumi dynamic provider):
- create/update deliver every file, then stop this node's previous start script (SIGTERM to the script
  itself, which checkpoints and uploads; SIGKILL to its group after a grace) and start the new one under
  setsid/nohup, so the next SIGTERM again reaches the script. Any change of a file, of the node's address
  or of its pod id is an update: a replaced node changes the hostfile, so every node gets it again.
- delete succeeds and does nothing: the node goes with its pod (and a start script is not a billed thing).
- read returns the state as is: what runs on a node is not something this provider can query cheaply.
- The private key comes from `$TRAINSTACK_SSH_KEY` (never an input, so never in state); file contents are
  rendered artifacts, which by construction hold no secret value.
"""

from __future__ import annotations

import hashlib
import shlex
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pulumi
from pulumi.dynamic import (
    CreateResult,
    ReadResult,
    UpdateResult,
)
from pydantic import field_validator

from common import contract
from providers.common import InputModel, args_of
from providers.delivery.ssh import Runner, Ssh, SshTarget, forget_host_key, run_process
from providers.resource import CheckedProvider, ResourceInputs, TypedResource

STOP_GRACE_S = 30  # the old script's SIGTERM path uploads the newest checkpoint within a few seconds

# Runs on the node: $1 dir, $2 staging dir, $3 start script, $4 log file, $5 stop grace (s).
_INSTALL = r"""set -euo pipefail
dir=$1 stage=$2 script=$3 log=$4 grace=$5
run="$dir/.run"
pidfile="$run/${RUNPOD_POD_ID:-$(hostname)}.pid"
mkdir -p "$run" "$dir/logs"
if [[ -f $pidfile ]]; then
  pid=$(cat "$pidfile")
  # Only a start script of this node (same network namespace, same script name): pids get reused. The right
  # side is quoted: unquoted, `net:[4026531833]` is a glob (a bracket expression) that never matches itself.
  if [[ -r /proc/$pid/ns/net && $(readlink "/proc/$pid/ns/net") == "$(readlink /proc/self/ns/net)" ]] &&
    grep -qa start-node "/proc/$pid/cmdline"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((grace * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done # gone before the new start
  fi
fi
(cd "$stage" && find . -type f) | while read -r f; do
  mkdir -p "$(dirname "$dir/$f")"
  mv -f "$stage/$f" "$dir/$f"  # rename within one file system: atomic for nodes sharing a volume
done
rm -rf "$stage"
chmod +x "$dir/$script"
cd "$dir"
setsid nohup bash "$dir/$script" </dev/null >>"$dir/logs/$log" 2>&1 &
echo $! >"$pidfile"
echo "started $script as pid $!"
"""


class NodeFilesSpec(InputModel):
    """Inputs of `delivery:NodeFiles`."""

    host: str  # where ssh reaches the node
    port: int = 22
    user: str = "root"
    pod_id: str  # the node's pod; keys its host key in known_hosts
    rank: int
    remote_dir: str  # the node's TRAINSTACK_WORKDIR, absolute
    files: dict[str, str]  # relative path -> content (hostfile, hosts, start-node-<rank>.sh, train/...)
    start_script: str  # one of `files`, run detached after delivery
    known_hosts: str  # the stack's own known_hosts file
    secrets_version: str | None = None  # the node's SecretsFile `version`: new values restart the script
    connect_timeout_s: float = 10.0
    deadline_s: float = 180.0  # per ssh/scp step: retries of a node whose sshd is not up yet

    @field_validator("remote_dir")
    @classmethod
    def _absolute(cls, v: str) -> str:
        if not v.startswith("/") or ".." in PurePosixPath(v).parts:
            raise ValueError(f"{v!r} must be an absolute path without '..'")
        return v

    @field_validator("files")
    @classmethod
    def _relative(cls, v: dict[str, str]) -> dict[str, str]:
        bad = [p for p in v if p.startswith("/") or ".." in PurePosixPath(p).parts or not p.strip()]
        if bad:
            raise ValueError(f"{bad} must be relative paths inside remote_dir")
        return v

    def rule_failures(self) -> list[tuple[str, str]]:
        if self.start_script not in self.files:
            return [("start_script", f"{self.start_script!r} is not among the files delivered")]
        return []


def digest(args: NodeFilesSpec) -> str:
    """What was delivered where: changes whenever a file, the address or the pod changes."""
    h = hashlib.sha256()
    for part in (args.host, str(args.port), args.pod_id, args.remote_dir, args.start_script):
        h.update(part.encode() + b"\0")
    for path in sorted(args.files):
        h.update(path.encode() + b"\0" + args.files[path].encode() + b"\0")
    return h.hexdigest()


def ssh_for(args: NodeFilesSpec, runner: Runner | None = None) -> Ssh:
    """ssh/scp to the node, with the stack's own known_hosts; `runner` replaces the binaries in tests."""
    known_hosts = Path(args.known_hosts)
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    target = SshTarget(args.host, args.port, args.user, args.pod_id, known_hosts)
    return Ssh(
        target,
        connect_timeout_s=args.connect_timeout_s,
        deadline_s=args.deadline_s,
        runner=run_process if runner is None else runner,
    )


def deliver(args: NodeFilesSpec, ssh: Ssh | None = None) -> str:
    """Copy the files, (re)start the start script; returns the script's first output line."""
    ssh = ssh or ssh_for(args)
    stage = f"{args.remote_dir}/.delivery-{args.pod_id}-{int(time.time() * 1000)}"
    ssh.run(f"mkdir -p {shlex.quote(args.remote_dir)}")
    with tempfile.TemporaryDirectory(prefix="trainstack-delivery-") as tmp:
        local = Path(tmp) / "stage"
        for rel, text in args.files.items():
            path = local / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            path.chmod(0o755 if rel.endswith(".sh") else 0o644)
        ssh.copy_dir(local, stage)
    log = f"{PurePosixPath(args.start_script).stem}.{args.pod_id}.log"
    argv = [args.remote_dir, stage, args.start_script, log, str(STOP_GRACE_S)]
    return ssh.run("bash -s -- " + " ".join(shlex.quote(a) for a in argv), _INSTALL.encode()).strip()


class NodeFilesProvider(CheckedProvider):
    """Lifecycle of `delivery:NodeFiles`; holds no state of its own (it is pickled into the stack). Every
    change is an update: delivery has nothing to replace."""

    args_model = NodeFilesSpec

    def __init__(self, runner: Runner | None = None) -> None:
        super().__init__()
        # None in real use (the ssh/scp binaries, and picklable); tests pass a recording runner.
        self._runner = runner

    def _deliver(self, args: NodeFilesSpec) -> None:
        deliver(args, ssh_for(args, self._runner))

    def diff_keys(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> set[str]:
        return set(NodeFilesSpec.model_fields)  # what an older state holds beyond them is not an input

    def create(self, props: dict[str, Any]) -> CreateResult:
        args = args_of(NodeFilesSpec, props)
        self._deliver(args)
        return CreateResult(f"{args.pod_id}-rank{args.rank}", self._outs(props, args))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = args_of(NodeFilesSpec, news)
        self._deliver(args)
        return UpdateResult(self._outs(news, args))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Nothing on the node (it is released with its pod); its host key is forgotten, since the pod, if
        it is only stopped, comes back with new host keys (`forget_host_key`)."""
        known_hosts, pod_id = props.get("known_hosts"), props.get("pod_id")
        if isinstance(known_hosts, str) and isinstance(pod_id, str) and pod_id:
            forget_host_key(Path(known_hosts), pod_id)

    def _outs(self, props: Mapping[str, Any], args: NodeFilesSpec) -> dict[str, Any]:
        return self.outputs(props, digest=digest(args), delivered_at=time.time())


@dataclass(frozen=True, kw_only=True)
class NodeFilesInputs(ResourceInputs):
    """Typed inputs of `delivery:NodeFiles` (checked in `check()` as `NodeFilesSpec`)."""

    host: pulumi.Input[str]
    port: pulumi.Input[int]
    pod_id: pulumi.Input[str]
    rank: int
    remote_dir: str
    files: pulumi.Input[Mapping[str, str]]
    start_script: str
    known_hosts: str
    user: str | None = None
    secrets_version: pulumi.Input[str] | None = None


class NodeFiles(TypedResource, module=contract.NODE_FILES.module, name=contract.NODE_FILES.name):
    """A node's artifacts, delivered and started (`pulumi-python:dynamic/delivery:NodeFiles`)."""

    provider_factory = NodeFilesProvider

    digest: pulumi.Output[str]
    delivered_at: pulumi.Output[float]
