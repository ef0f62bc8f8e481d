"""The supervisor's Pulumi calls, all of them: one stack on its own workspace and backend (`PulumiStack`),
`pulumi up` with the policy pack and a stale lock's one retry (`pulumi_up`), and the keys of the stack's
config the supervisor writes. supervisor/act.py (releases, a pool's trials) and supervisor/recoverer.py
(recoveries) act through these alone, so the stack client they use is chosen here, in one place.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import contract, pulumi
from common.stack import Stack, lock_owner

REPO = Path(__file__).resolve().parents[1]
PHASE_KEY = "trainstack:run.phase"
ENDED_TRIALS_KEY = "trainstack:run.ended_trials"
RELEASING_TRIALS_KEY = "trainstack:run.releasing_trials"
AVOID_KEY = "trainstack:recovery.avoid_data_centers"
CLUSTER_TYPE = contract.CLUSTER.type
POD_TYPE = contract.POD.type
FILES_TYPE = contract.NODE_FILES.type


class ReleaseError(RuntimeError):
    """The Pulumi update that releases compute failed; the next round tries again from the phase it left."""


class RecoveryError(RuntimeError):
    """A Pulumi update of a recovery failed; the attempt is recorded `failed` and the next round decides."""


@dataclass(frozen=True)
class PulumiStack:
    """One stack on its own workspace and backend (the one `scripts/up` uses), each verb through the stack's
    one client (common/stack.py), in this process's environment (the supervisor's command line sets
    Pulumi's). Every failure is a PulumiError naming the command and Pulumi's last line."""

    name: str
    workspace: Path

    @property
    def client(self) -> Stack:
        return Stack(self.name, self.workspace)

    def set_config(self, key: str, value: str) -> None:
        """`pulumi config set --path KEY VALUE` (plain text; a path's `[i]` makes a list, `2` an integer)."""
        self.client.set_config(key, value, path=True, plaintext=True)

    def config(self) -> dict[str, Any]:
        """The stack's config, secrets dropped (common/pulumi.py's one reader)."""
        return self.client.config()

    def resources(self) -> list[Mapping[str, Any]]:
        """The resources of `pulumi stack export`'s deployment."""
        return list(self.client.export().resources)

    def cancel(self) -> None:
        self.client.cancel(check=True)

    def up(
        self,
        *,
        on_output: Callable[[str], None],
        on_event: Callable[[Mapping[str, Any]], None] | None = None,
        refresh: bool = False,
        replace: Sequence[str] = (),
        policy_packs: Sequence[str] = (),
        policy_pack_configs: Sequence[str] = (),
    ) -> dict[str, int]:
        """`pulumi up --yes --skip-preview` with its output and engine events handed over as they come;
        returns the summary's resource changes (`{"same": 3, "replace": 1}`). PulumiError when it fails, with
        everything Pulumi printed in `output`."""
        changes: dict[str, int] = {}

        def event(raw: dict[str, Any]) -> None:
            summary = raw.get("summaryEvent")
            if isinstance(summary, dict):
                changes.update(summary.get("resourceChanges") or {})
            if on_event is not None:
                on_event(raw)

        flags = ["--yes", "--skip-preview", "--color", "never", *(["--refresh"] if refresh else [])]
        flags += [flag for urn in replace for flag in ("--replace", urn)]
        flags += [flag for path in policy_packs for flag in ("--policy-pack", path)]
        flags += [flag for path in policy_pack_configs for flag in ("--policy-pack-config", path)]
        done = self.client.up(*flags, on_output=on_output, on_event=event)
        if not done.ok:
            raise pulumi.PulumiError(f"`pulumi up` failed ({done.code})", output=done.output)
        return changes


def select_stack(stack: str, workspace: Path) -> PulumiStack:
    """The stack on its own workspace and backend."""
    return PulumiStack(stack, workspace)


def policy_options(stack: str, pack: Path | None = REPO / "policy") -> dict[str, Any]:
    """`pulumi up`'s policy pack and its per-stack config: every update the supervisor makes is judged."""
    if pack is None:
        return {}
    config = REPO / "policy" / "config" / f"{stack}.json"
    return {"policy_packs": [str(pack)], "policy_pack_configs": [str(config)] if config.is_file() else []}


def pulumi_up(
    stack: Any,
    what: str,
    log: Callable[[str], None],
    fail: type[RuntimeError],
    prefix: str,
    **kwargs: Any,
) -> dict[str, int]:
    """`pulumi up` (kwargs: policy packs, refresh, replace, on_event), its output logged line by line; once
    more after clearing a lock that a killed process of this machine left (a supervisor killed mid-update
    leaves the file backend's lock behind, and no later round could finish). A failure raises `fail` with
    Pulumi's own error lines."""

    def line(text: str) -> None:
        if text.strip():
            log(f"  pulumi: {text.rstrip()}")

    log(f"{prefix}: pulumi up ({what})")
    try:
        try:
            changes = stack.up(on_output=line, **kwargs)
        except pulumi.PulumiError as exc:
            holder = stale_lock_holder(f"{exc}\n{exc.output}")
            if holder is None:
                raise
            log(f"{prefix}: the stack's lock was left by {holder}, which no longer runs: pulumi cancel")
            stack.cancel()
            changes = stack.up(on_output=line, **kwargs)
    except pulumi.PulumiError as exc:
        lines = [text.strip() for text in f"{exc}\n{exc.output}".splitlines() if text.strip()]
        said = [text for text in lines if "error" in text.lower()][-3:] or lines[-3:]
        raise fail(f"pulumi up ({what}) failed: {' | '.join(said)}") from None
    applied: dict[str, int] = dict(changes or {})
    log(f"{prefix}: {what} applied ({applied})")
    return applied


def run_list(stack: Any, key: str) -> list[int]:
    """The pod indices the stack's config holds under `key` (a `trainstack:run` list; none: empty)."""
    section, _, name = key.partition(".")
    run = stack.config().get(section)
    if isinstance(run, str):  # a value Pulumi kept as text, not as an object
        try:
            run = json.loads(run)
        except ValueError:
            return []
    found = run.get(name) if isinstance(run, dict) else None
    if not isinstance(found, list):
        return []
    return [int(i) for i in found if isinstance(i, int) and not isinstance(i, bool)]


def deleted_compute(event: Mapping[str, Any]) -> bool:
    """Whether an engine event (`pulumi up --event-log`) reports a cluster or pod deleted: its outputs
    event with op `delete` or `delete-replaced`. Pure."""
    done = event.get("resOutputsEvent")
    meta = done.get("metadata") if isinstance(done, Mapping) else None
    if not isinstance(meta, Mapping) or meta.get("type") not in (CLUSTER_TYPE, POD_TYPE):
        return False
    return meta.get("op") in ("delete", "delete-replaced")


@contextmanager
def failing_as(fail: type[RuntimeError], prefix: str) -> Iterator[None]:
    """A Pulumi command that failed outside `pulumi up` (config set, stack export, cancel) raised as `fail`,
    its message naming the command and Pulumi's last line: the round records it and the next one retries."""
    try:
        yield
    except pulumi.PulumiError as exc:
        raise fail(f"{prefix}: {exc}") from None


def stale_lock_holder(message: str, host: str | None = None) -> str | None:
    """`user@host (pid N)` when Pulumi's error says the stack is locked by a process of this machine that
    no longer runs (its pid gone, or reused by something other than pulumi); None otherwise: a lock held
    elsewhere, or by a live `pulumi`, is never cleared here (scripts/recover does it by hand)."""
    owner = lock_owner(message)  # common/stack.py reads Pulumi's refusal, the one place
    if owner is None or owner.host != (host or socket.gethostname()):
        return None
    pid = owner.pid
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        cmdline = b""
    if b"pulumi" in cmdline:
        return None
    return str(owner)
