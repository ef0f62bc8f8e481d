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
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

from common.cachedir import cache_dir
from common.errors import TrainstackError

REPO = Path(__file__).resolve().parents[1]
# A fixed passphrase is fine for the local demo stacks, whose secrets are local test values, and only there.
DEMO_PASSPHRASE = "trainstack-local-demo"  # noqa: S105


class PulumiError(TrainstackError):
    """A `pulumi` command failed; the message names the command and Pulumi's last line. `output`: what the
    command printed, for a caller that reads more of it (a lock's holder, Pulumi's own error lines)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


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
    # The Go garbage collector of the CLI and its language host at half the frequency (a heap twice as
    # large between passes, tens of MB): paired runs of 60 short CLI calls (config, stack export, stack ls)
    # took 11.85 CPU-s at Go's default of 100, 11.06 at 200, the mean of 3 each (issue #47). Yours wins.
    env.setdefault("GOGC", "200")
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
    """The argv of one `pulumi` command: `--stack`, `--cwd` and `--non-interactive` added as asked, before a
    `--` that ends the flags (`config set KEY -- VALUE`). `binary`: another program in Pulumi's place (a
    test's recorded CLI)."""
    flags: list[str] = []
    if stack is not None:
        flags += ["--stack", stack]
    if cwd is not None:
        flags += ["--cwd", str(cwd)]
    if not interactive:
        flags.append("--non-interactive")
    args = list(args)
    end = args.index("--") if "--" in args else len(args)
    return [binary, *args[:end], *flags, *args[end:]]


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
    on_output: Callable[[str], None] | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `pulumi ARGS` (text mode). `check`: raise PulumiError naming the command when it fails.
    `capture=False` leaves stdout and stderr to the terminal (Pulumi's own progress and prompts).
    `on_output`: each line as Pulumi prints it (stdout and stderr in one stream, kept in `stdout` too);
    `on_event`: each engine event of `--event-log` (a JSON object: `resOutputsEvent`, `summaryEvent`, ...)
    while the command runs. Either streams the command, so `stdin` and `timeout` do not apply to it."""
    streamed = on_output is not None or on_event is not None
    with tempfile.TemporaryDirectory(prefix="trainstack-pulumi-") as tmp:
        events = Path(tmp) / "events.jsonl"
        if on_event is not None:
            args = [*args, "--event-log", str(events)]
            # `--event-log` is one of Pulumi's debug flags: the CLI knows it only with this set.
            env = {**(os.environ if env is None else env), "PULUMI_DEBUG_COMMANDS": "true"}
        argv = command(args, stack=stack, cwd=cwd, interactive=interactive, binary=binary)
        # OSError (no pulumi on PATH, no such folder) and TimeoutExpired reach the caller, which names them.
        if streamed:
            done = _streamed(argv, env, on_output, on_event, events)
        else:
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
        said = (done.stderr or "").strip() or (done.stdout or "").strip()
        last = (said.splitlines() or ["no output"])[-1]
        raise PulumiError(
            f"`pulumi {' '.join(args[:2])}` failed ({done.returncode}): {last}",
            output=f"{done.stdout or ''}{done.stderr or ''}",
        )
    return done


def _streamed(
    argv: list[str],
    env: Mapping[str, str] | None,
    on_output: Callable[[str], None] | None,
    on_event: Callable[[dict[str, Any]], None] | None,
    events: Path,
) -> subprocess.CompletedProcess[str]:
    """`argv` with its output handed over line by line and its event log read as Pulumi writes it."""
    ended = threading.Event()
    reader = None
    if on_event is not None:
        reader = threading.Thread(target=_follow, args=(events, on_event, ended), daemon=True)
        reader.start()
    lines: list[str] = []
    try:
        with subprocess.Popen(
            argv,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as proc:
            for line in proc.stdout or ():
                lines.append(line)
                if on_output is not None:
                    on_output(line)
            code = proc.wait()
    finally:
        ended.set()
        if reader is not None:
            reader.join()
    return subprocess.CompletedProcess(argv, code, "".join(lines), "")


def _follow(path: Path, on_event: Callable[[dict[str, Any]], None], ended: threading.Event) -> None:
    """Hand each whole JSON line of the event log `path` to `on_event` as it is written, until `ended` is set
    and the file is read to its end (a line that is not a JSON object is skipped)."""
    pending = ""
    handle = None
    try:
        while True:
            last = ended.is_set()  # read once more after the command ended: its last events
            if handle is None and path.exists():
                handle = path.open(encoding="utf-8")
            chunk = handle.read() if handle is not None else ""
            *whole, pending = (pending + chunk).split("\n")
            for text in whole:
                try:
                    event = json.loads(text)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    on_event(event)
            if last:
                return
            if not chunk:
                ended.wait(0.05)
    finally:
        if handle is not None:
            handle.close()


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
