"""`delivery:SecretsFile`: a machine's secrets, written over SSH into a file only root reads.

RunPod's secret store lives only in GraphQL, which RunPod retires (docs/RUNPOD-CONTRACT.md), and a value in
a pod's env is plain text in its RunPod definition. So trainstack writes the values itself, over the same
SSH delivery as the node's files (docs/OPERATING.md, "Secrets on the node"):

- where: `SECRETS_DIR/<pod id>.env` (`/run/trainstack/secrets`, mode 0700; the file 0600, root's), on the
  container's own disk: never under the workspace or a network volume, so a volume shared by a cluster or
  kept after the pod never holds a secret. Lines `export NAME='value'`, which the start script sources;
- how: the values go over ssh's stdin, never on a command line or in an argument; the file is written to a
  temporary name and renamed, so a reader sees the old file or the new one;
- when: create, and every change of a value, of the node's address, pod id or boot (a replaced or restarted
  node: RunPod wipes the container disk at a stop). A refresh that finds the file gone (a container
  restarted behind Pulumi's back) drops its hash, so the next `up` writes it again;
- delete removes the file in one short attempt; it goes with the container anyway.

`write_secrets_file` and `remove_secrets_file` are the plain functions under the resource: any pod reached
by `providers.delivery.ssh.Ssh` (the supervisor's controller pod too) gets its secrets this way:

    ssh = Ssh(SshTarget(host, port, "root", pod_id, known_hosts_file(stack)))
    write_secrets_file(ssh, secrets_path(pod_id), {"AWS_ACCESS_KEY_ID": ..., ...})   # then `source` it

and a Pulumi program declares `SecretsFile` (as components/delivery.py does per node) to have it re-written
whenever the pod, its boot or a value changes. The values
are Pulumi secret inputs (encrypted in state); outputs hold only a salted hash (a secret) and `version`, a
digest of that hash that changes with the values (NodeFiles restarts the start script on it).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, UpdateResult
from pydantic import field_validator

from common import contract
from providers.common import InputModel, args_of, contains_unknown
from providers.delivery.ssh import DeliveryError, Runner, Ssh, SshTarget, run_process
from providers.resource import CheckedProvider, ResourceInputs, TypedResource
from providers.runpod.secret import hash_value, matches

SECRETS_DIR = contract.SECRETS_DIR  # the container's own disk; never the workspace or a volume
WORKSPACE = "/workspace"  # RunPod's volume mount: no secret under it
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

# Runs on the machine as `bash -c <this> secrets-file <path>`; the file's text arrives on stdin. Prints
# nothing of the text (a failure's stderr reaches the error message).
_WRITE = r"""set -euo pipefail
umask 077
path=$1 dir=$(dirname "$1")
mkdir -p "$dir" && chmod 700 "$dir"
tmp=$(mktemp "$path.XXXXXX")
cat >"$tmp"
chmod 600 "$tmp"
mv -f "$tmp" "$path"
"""
_PRESENT = 'test -f "$1" && echo present || echo missing'


def secrets_path(pod_id: str, directory: str = SECRETS_DIR) -> str:
    """Where a pod's secrets file lives: one per pod id, since emulated hosts share one file system."""
    return f"{directory}/{pod_id}.env"


def render(values: Mapping[str, str]) -> str:
    """The file's text: `export NAME='value'` lines, sorted; names must be environment variable names."""
    bad = [n for n in values if not _NAME.match(n)]
    if bad:
        raise ValueError(f"secret names {bad} are not environment variable names")
    return "".join(f"export {name}={shlex.quote(values[name])}\n" for name in sorted(values))


def write_secrets_file(ssh: Ssh, path: str, values: Mapping[str, str]) -> None:
    """Write `values` to `path` on the machine `ssh` reaches: mode 0600 in a 0700 directory, atomically.
    The values travel on stdin only; raises DeliveryError (never quoting a value) when it cannot."""
    ssh.run(f"bash -c {shlex.quote(_WRITE)} secrets-file {shlex.quote(path)}", render(values).encode())


def secrets_file_present(ssh: Ssh, path: str) -> bool:
    return ssh.run(f"bash -c {shlex.quote(_PRESENT)} secrets-file {shlex.quote(path)}").strip() == "present"


def remove_secrets_file(ssh: Ssh, path: str) -> None:
    ssh.run(f"rm -f {shlex.quote(path)}")


def _canonical(values: Mapping[str, Any]) -> str:
    return json.dumps(dict(values), sort_keys=True)


def version_of(values_hash: str) -> str:
    """A digest of the salted hash: changes with the values, tells nothing about them."""
    return hashlib.sha256(values_hash.encode()).hexdigest()[:16]


class SecretsFileSpec(InputModel):
    """Inputs of `delivery:SecretsFile`."""

    host: str
    port: int = 22
    user: str = "root"
    pod_id: str  # the machine's pod; keys its host key and names the file
    boot: int = 0  # starts after a declared stop: a new container, whose disk lost the file
    path: str  # absolute, outside the workspace
    values: dict[str, str]  # env name -> value (a Pulumi secret)
    known_hosts: str
    connect_timeout_s: float = 10.0
    deadline_s: float = 180.0  # per ssh step: retries while the node's sshd is not up yet

    @field_validator("path")
    @classmethod
    def _outside_workspace(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not v.startswith("/") or ".." in p.parts or p.is_relative_to(WORKSPACE):
            raise ValueError("must be an absolute path without '..', outside /workspace (a shared volume)")
        return v

    @field_validator("values")
    @classmethod
    def _names(cls, v: dict[str, str]) -> dict[str, str]:
        bad = sorted(n for n in v if not _NAME.match(n))
        if bad:
            raise ValueError(f"{bad} are not environment variable names")  # names only, never values
        return v


QUICK_CONNECT_S = 3.0  # read and delete try once, briefly: a stopped or gone node must not hold up a command


def ssh_to(args: SecretsFileSpec, runner: Runner | None = None, deadline_s: float | None = None) -> Ssh:
    """ssh to the machine with the stack's known_hosts; `deadline_s` 0: one short attempt (read, delete)."""
    known_hosts = Path(args.known_hosts)
    known_hosts.parent.mkdir(parents=True, exist_ok=True)
    target = SshTarget(args.host, args.port, args.user, args.pod_id, known_hosts)
    return Ssh(
        target,
        connect_timeout_s=args.connect_timeout_s if deadline_s is None else QUICK_CONNECT_S,
        deadline_s=args.deadline_s if deadline_s is None else deadline_s,
        step_timeout_s=120.0 if deadline_s is None else 2 * QUICK_CONNECT_S + 5,
        runner=run_process if runner is None else runner,
    )


class SecretsFileProvider(CheckedProvider):
    """Lifecycle of `delivery:SecretsFile`. Every change is an update (a write); nothing replaces."""

    args_model = SecretsFileSpec

    def __init__(self, runner: Runner | None = None) -> None:
        super().__init__()
        self._runner = runner  # None in real use (the ssh binary, and picklable); tests pass a fake

    def diff_keys(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> set[str]:
        return set(SecretsFileSpec.model_fields) - {"values"}  # values: compared by their salted hash

    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        base = super().diff(id_, olds, news)
        values = news.get("values")
        changed = contains_unknown(values) or not matches(_canonical(values or {}), olds.get("values_hash"))
        return DiffResult(changes=bool(base.changes) or changed, replaces=[])

    def _write(self, props: Mapping[str, Any], old_hash: Any = None) -> dict[str, Any]:
        args = args_of(SecretsFileSpec, props)
        write_secrets_file(ssh_to(args, self._runner), args.path, args.values)
        canonical = _canonical(args.values)
        stored = old_hash if matches(canonical, old_hash) else hash_value(canonical)
        kept = {k: v for k, v in props.items() if k in SecretsFileSpec.model_fields and k != "values"}
        return self.outputs(kept, values_hash=stored, version=version_of(stored), delivered_at=time.time())

    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult(f"{props['pod_id']}-secrets", self._write(props))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self._write(news, olds.get("values_hash")))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        """The file as the state has it, unless the machine answers that it is gone (then the next `up`
        writes it again); a machine that does not answer at once leaves the state as it is."""
        try:
            args = args_of(SecretsFileSpec, {**props, "values": {}})
            present = secrets_file_present(ssh_to(args, self._runner, deadline_s=0), args.path)
        except (DeliveryError, ValueError):
            return ReadResult(id_, props)
        return ReadResult(id_, props if present else {**props, "values_hash": "missing on the node"})

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """One short attempt to remove the file; it goes with the container in any case."""
        try:
            args = args_of(SecretsFileSpec, {**props, "values": {}})
            remove_secrets_file(ssh_to(args, self._runner, deadline_s=0), args.path)
        except (DeliveryError, ValueError):
            pulumi.log.info(
                "secrets file not removed: its machine did not answer (it goes with its container)"
            )


@dataclass(frozen=True, kw_only=True)
class SecretsFileInputs(ResourceInputs):
    """Typed inputs of `delivery:SecretsFile` (checked in `check()` as `SecretsFileSpec`)."""

    host: pulumi.Input[str]
    port: pulumi.Input[int]
    pod_id: pulumi.Input[str]
    path: pulumi.Input[str]
    values: pulumi.Input[Mapping[str, pulumi.Input[str]]]
    known_hosts: str
    boot: pulumi.Input[int] | None = None
    user: str | None = None


class SecretsFile(TypedResource, module=contract.SECRETS_FILE.module, name=contract.SECRETS_FILE.name):
    """A machine's secrets file (`pulumi-python:dynamic/delivery:SecretsFile`); `values` always a secret."""

    provider_factory = SecretsFileProvider
    secret_outputs = ("values", "values_hash")

    values_hash: pulumi.Output[str]  # salted; a secret output
    version: pulumi.Output[str]  # changes with the values; tells nothing about them
    delivered_at: pulumi.Output[float]

    def props_of(self, inputs: ResourceInputs) -> dict[str, Any]:
        assert isinstance(inputs, SecretsFileInputs)
        return {**inputs.to_props(), "values": pulumi.Output.secret(inputs.values)}
