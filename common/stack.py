"""One typed client for a stack: every conversation with Pulumi about one stack, on the one runner
(common/pulumi.py), answered with records.

    stack = Stack("dev", workspace)
    stack.select(create=True)
    outcome = stack.up("--yes", "--suppress-outputs", shown=True)   # an Outcome: code, output, lock owner
    outputs = stack.outputs()                                      # the stack outputs, a dict
    state = stack.export()                                         # a State: deployment, resources, ids

A verb (`up`, `preview`, `refresh`, `destroy`, `cancel`, `unprotect_all`) answers an `Outcome` whatever its
exit code; `check=True` raises PulumiError naming the command instead. The readers (`outputs`, `export`,
`config`, `config_entries`, `stacks`) raise PulumiError when Pulumi cannot answer or prints no JSON.
tests/test_doors.py holds that no module, shell script or CI workflow runs the Pulumi CLI or reads a stack's
export or outputs but through here (or `trainstack pulumi`, the user's own passthrough). Standard library
only, as common/ is.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common import pulumi
from common.pulumi import PulumiError

# Pulumi's message for a stack another update holds: "the stack is currently locked by 1 lock(s) ...
# created by user@host (pid 1234)".
_LOCKED = re.compile(
    r"currently locked.*?created by (?P<user>[^@\s]+)@(?P<host>\S+) \(pid (?P<pid>\d+)\)", re.S
)


def cli_version() -> str:
    """`pulumi version`: the CLI on PATH (the one scripts/bootstrap built), as it names itself."""
    return (pulumi.run(["version"]).stdout or "").strip()


@dataclass(frozen=True)
class LockOwner:
    """Who holds a stack's update lock, as Pulumi's refusal names it."""

    user: str
    host: str
    pid: int

    def __str__(self) -> str:
        return f"{self.user}@{self.host} (pid {self.pid})"


def lock_owner(message: str) -> LockOwner | None:
    """The lock's owner in Pulumi's 'currently locked' message; None when the message is another one."""
    found = _LOCKED.search(message)
    if found is None:
        return None
    return LockOwner(found["user"], found["host"], int(found["pid"]))


@dataclass(frozen=True)
class Outcome:
    """What one Pulumi verb did: `code` (0: done), what it printed (`output`: stdout, or both streams when
    streamed; `errors`: stderr where kept apart)."""

    command: str
    code: int
    output: str = ""
    errors: str = ""

    @property
    def ok(self) -> bool:
        return self.code == 0

    @property
    def locked(self) -> bool:
        """Refused because another update holds the stack's lock."""
        return "currently locked" in self.errors or "currently locked" in self.output

    @property
    def lock_owner(self) -> LockOwner | None:
        return lock_owner(f"{self.errors}\n{self.output}")

    @property
    def last_line(self) -> str:
        said = self.errors.strip() or self.output.strip()
        return (said.splitlines() or ["no output"])[-1]

    @property
    def cause(self) -> str:
        """Pulumi's own cause of a failure (its Diagnostics' error, a provider's message), else the last line
        it printed (common/pulumi.py `failure_cause`)."""
        return pulumi.failure_cause(f"{self.output}\n{self.errors}") or self.last_line


@dataclass(frozen=True)
class State:
    """`pulumi stack export` of a stack: the whole export (`version`, `deployment`), as Pulumi wrote it
    (secrets stay encrypted)."""

    exported: Mapping[str, Any]

    @property
    def deployment(self) -> dict[str, Any]:
        deployment = self.exported.get("deployment") or {}
        return dict(deployment) if isinstance(deployment, Mapping) else {}

    @property
    def resources(self) -> list[dict[str, Any]]:
        return [r for r in self.deployment.get("resources") or [] if isinstance(r, dict)]

    @property
    def ids(self) -> set[str]:
        """The provider ids of its resources (what the cloud calls them)."""
        return {str(r["id"]) for r in self.resources if r.get("id")}

    def urn_of(self, type_suffix: str) -> str:
        """The urn of the first resource whose type ends with `type_suffix`; '' when there is none."""
        return next(
            (str(r["urn"]) for r in self.resources if str(r.get("type", "")).endswith(type_suffix)), ""
        )

    def with_deployment(self, deployment: Mapping[str, Any]) -> State:
        return State({**self.exported, "deployment": dict(deployment)})


@dataclass(frozen=True)
class Stack:
    """One stack of the project in `workspace` (the folder of its Pulumi.yaml); `name` '' is the stack the
    workspace has selected. `env`: the environment of every command (default: this process's); `binary`:
    another program in Pulumi's place (a test's)."""

    name: str
    workspace: Path
    env: Mapping[str, str] | None = field(default=None, repr=False)
    binary: str = "pulumi"
    timeout: float | None = None
    tree: bool = False  # a timeout kills the CLI and its plugins (common/pulumi.py's `run`)

    # -- the runner ------------------------------------------------------------------------------------

    def _run(self, args: Sequence[str], *, named: bool = True, **kwargs: Any) -> Outcome:
        kwargs.setdefault("timeout", self.timeout)
        if self.tree:
            kwargs.setdefault("tree", True)
        done = pulumi.run(
            args, stack=self.name if named and self.name else None, cwd=self.workspace, env=self.env,
            binary=self.binary, **kwargs,
        )  # fmt: skip
        return Outcome(f"pulumi {' '.join(args[:2])}", done.returncode, done.stdout or "", done.stderr or "")

    def _checked(self, args: Sequence[str], *, named: bool = True, **kwargs: Any) -> Outcome:
        outcome = self._run(args, named=named, **kwargs)
        if not outcome.ok:
            raise PulumiError(
                f"`{outcome.command}` failed ({outcome.code}): {outcome.cause}",
                output=f"{outcome.output}{outcome.errors}",
                last=outcome.last_line,
            )
        return outcome

    def _json(self, args: Sequence[str], *, named: bool = True) -> Any:
        outcome = self._checked(args, named=named)
        try:
            return json.loads(outcome.output or "null")
        except ValueError:
            raise PulumiError(f"`{outcome.command}` printed no JSON") from None

    def _verb(
        self, verb: str, flags: Sequence[str], *, check: bool = False,
        extra_env: Mapping[str, str] | None = None, **how: Any,
    ) -> Outcome:  # fmt: skip
        """`how`: the runner's own options (capture, interactive, shown, on_output, on_event, timeout)."""
        stack = (
            self
            if extra_env is None
            else replace(self, env={**(os.environ if self.env is None else self.env), **extra_env})
        )
        args = [*verb.split(), *flags]
        return stack._checked(args, **how) if check else stack._run(args, **how)

    # -- the verbs ---------------------------------------------------------------------------------------

    def up(self, *flags: str, **how: Any) -> Outcome:
        """`pulumi up FLAGS`. `shown=True`: stdout to the terminal as it comes (Pulumi's repeated rows
        dropped without one), stderr shown and kept in `errors`; `capture=False`: both left to the terminal;
        `on_output`/`on_event`: each line, each engine event, as the update runs."""
        return self._verb("up", flags, **how)

    def preview(self, *flags: str, **how: Any) -> Outcome:
        return self._verb("preview", flags, **how)

    def refresh(self, *flags: str, **how: Any) -> Outcome:
        return self._verb("refresh", flags, **how)

    def destroy(self, *flags: str, **how: Any) -> Outcome:
        return self._verb("destroy", flags, **how)

    def cancel(self, **how: Any) -> Outcome:
        """`pulumi cancel --yes`: the stack's update lock given up (its update is not stopped)."""
        return self._verb("cancel", ["--yes"], **how)

    def unprotect_all(self, **how: Any) -> Outcome:
        return self._verb("state unprotect", ["--all", "--yes"], **how)

    def stacks(self) -> list[str]:
        """`pulumi stack ls --json`: the names of the project's stacks in the backend (this one or not)."""
        listed = self._json(["stack", "ls", "--json"], named=False)
        if not isinstance(listed, list):
            raise PulumiError("`pulumi stack ls` printed no JSON list")
        return [str(s["name"]) for s in listed]

    def select(self, *, create: bool = False, check: bool = False) -> bool:
        """`pulumi stack select` (and `--create`): True when the stack is now selected in the workspace."""
        args = ["stack", "select", *(["--create"] if create else []), self.name]
        outcome = self._checked(args, named=False, capture=False) if check else self._run(args, named=False)
        return outcome.ok

    def cli(self, *args: str, check: bool = False, **how: Any) -> Outcome:
        """Any other `pulumi ARGS` in this stack's workspace (`--stack` added when the stack is named): what
        the tests' harness and the benchmarks run (stack init, config set, import). `how`: the runner's."""
        return self._checked(args, **how) if check else self._run(args, **how)

    # -- the readers -------------------------------------------------------------------------------------

    def outputs(self, *, show_secrets: bool = False) -> dict[str, Any]:
        """`pulumi stack output --json`: the stack outputs (secrets masked unless `show_secrets`)."""
        data = self._json(["stack", "output", "--json", *(["--show-secrets"] if show_secrets else [])])
        if not isinstance(data, dict):
            raise PulumiError(f"the outputs of '{self.name}' are not a JSON object")
        return data

    def export(self) -> State:
        """`pulumi stack export`: the stack's state (secrets stay encrypted)."""
        data = self._json(["stack", "export"])
        return State(data if isinstance(data, dict) else {})

    def import_state(self, state: State) -> None:
        """`pulumi stack import` of `state` (a state this client exported, changed)."""
        with tempfile.NamedTemporaryFile("w", suffix=".json") as file:  # secrets stay as the export has them
            json.dump(dict(state.exported), file)
            file.flush()
            self._checked(["stack", "import", "--file", file.name])

    def init(self) -> None:
        """`pulumi stack init`: the stack created, empty, in the backend."""
        self._checked(["stack", "init", self.name], named=False)

    def config_entries(self) -> dict[str, Any]:
        """`pulumi config --json` as Pulumi prints it (`key -> {value, secret, ...}`; a secret's value is not
        shown)."""
        return pulumi.config_entries(self.name, self.workspace, self.env, self.timeout or 60)

    def config(self) -> dict[str, Any]:
        """The stack's config as Pulumi resolves it, secrets dropped."""
        return pulumi.plain_config(self.config_entries())

    def set_config(
        self, key: str, value: str | None = None, *, secret: bool = False, path: bool = False,
        kind: str | None = None, stdin: str | None = None, plaintext: bool = False,
    ) -> None:  # fmt: skip
        """`pulumi config set [--secret|--plaintext] [--path] [--type KIND] KEY [-- VALUE]`; `stdin`: the
        value read from standard input (a secret never on a command line)."""
        flags = [*(["--secret"] if secret else []), *(["--plaintext"] if plaintext else [])]
        flags += ["--path"] if path else []
        flags += ["--type", kind] if kind else []
        value_args = ["--", value] if value is not None else []
        self._checked(["config", "set", *flags, key, *value_args], stdin=stdin)
