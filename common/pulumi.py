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
import re
import shlex
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from common import process
from common.cachedir import cache_dir
from common.errors import TrainstackError

REPO = Path(__file__).resolve().parents[1]
# A fixed passphrase is fine for the local demo stacks, whose secrets are local test values, and only there.
DEMO_PASSPHRASE = "trainstack-local-demo"  # noqa: S105


class PulumiError(TrainstackError):
    """A `pulumi` command failed; the message names the command and Pulumi's last line. `output`: what the
    command printed, for a caller that reads more of it (a lock's holder, Pulumi's own error lines); `last`:
    that last line ('' when the command ran but printed no JSON where JSON was asked for)."""

    def __init__(self, message: str, output: str = "", last: str = "") -> None:
        super().__init__(message)
        self.output = output
        self.last = last


# The engine's own summary lines under Diagnostics, which name no cause: the resource's line says it.
_GENERIC = re.compile(
    r"^(update|preview|refresh|destroy) failed$|^Resource monitor has terminated|^one or more errors occurred"
)
_DIAGNOSTIC = re.compile(r"^(?P<indent>\s+)error: (?P<message>.*)$")


def failure_cause(output: str) -> str:
    """The cause Pulumi gives for a failed command: the first `error:` of its Diagnostics that is not the
    engine's summary (for a provider's traceback, its last line: the exception and its message, e.g.
    "BucketError: cannot update the checkpoint bucket: ... NoSuchBucket ..."); '' when there is none. A
    failed update ends with "Duration: 1s", which names nothing (issue #62)."""
    lines = output.split("Diagnostics:", 1)[1].splitlines() if "Diagnostics:" in output else []
    for i, line in enumerate(lines):
        if line and not line[0].isspace():
            break  # Resources:, Duration: the section ended
        found = _DIAGNOSTIC.match(line)
        if found is None or _GENERIC.search(found["message"].strip()):
            continue
        message = found["message"].strip()
        if message.startswith("Traceback"):  # its frames are indented deeper; the exception's line is not
            indent = len(found["indent"])
            after = [b for b in lines[i + 1 :] if b.strip()]
            last = next((b for b in after if len(b) - len(b.lstrip()) <= indent), "")
            if last and len(last) - len(last.lstrip()) == indent and not _DIAGNOSTIC.match(last):
                message = last.strip()
        return message
    return ""


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
    shown: bool = False,
    tree: bool = False,
    workdir: Path | None = None,
    merged: bool = False,
    on_start: Callable[[int], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `pulumi ARGS` (text mode). `check`: raise PulumiError naming the command when it fails.
    `capture=False` leaves stdout and stderr to the terminal (Pulumi's own progress and prompts).
    `on_output`: each line as Pulumi prints it (stdout and stderr in one stream, kept in `stdout` too);
    `on_event`: each engine event of `--event-log` (a JSON object: `resOutputsEvent`, `summaryEvent`, ...)
    while the command runs. Either streams the command, so `stdin` and `timeout` do not apply to it.
    `shown`: stdout to this terminal as it comes (without one, Pulumi's repeated rows dropped), stderr shown
    and kept in `stderr`: an `up` the operator watches, whose refusal (a lock's) is read after.
    `tree`: the CLI in a session of its own, and a timeout kills it with every plugin it started before
    TimeoutExpired is raised (the tests' and benchmarks' runs); `workdir`: the process's own folder;
    `merged`: stderr into stdout; `on_start`: called with the CLI's pid once it runs (an RSS sampler)."""
    streamed = on_output is not None or on_event is not None
    with tempfile.TemporaryDirectory(prefix="trainstack-pulumi-") as tmp:
        events = Path(tmp) / "events.jsonl"
        if on_event is not None:
            args = [*args, "--event-log", str(events)]
            # `--event-log` is one of Pulumi's debug flags: the CLI knows it only with this set.
            env = {**(os.environ if env is None else env), "PULUMI_DEBUG_COMMANDS": "true"}
        argv = command(args, stack=stack, cwd=cwd, interactive=interactive, binary=binary)
        # OSError (no pulumi on PATH, no such folder) and TimeoutExpired reach the caller, which names them.
        if shown:
            done = _shown(argv, env)
        elif tree or on_start is not None or merged or workdir is not None:
            done = _owned(argv, env, workdir, stdin, timeout, tree=tree, merged=merged, on_start=on_start)
        elif streamed:
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
        cause = failure_cause(f"{done.stdout or ''}\n{done.stderr or ''}")
        last = cause or (said.splitlines() or ["no output"])[-1]
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


# Without a terminal Pulumi prints a resource's row again each time its status or message changes: drop those
# repeats (the stack's rows of a no-op, any resource row that carries a warning; Diagnostics lists each once)
# and the policy pack's loading lines. On a terminal Pulumi redraws its rows in place and is left alone.
_REPEATS = re.compile(
    r"^(    pulumi:pulumi:Stack [^ ]+ "
    r"| [^ ]{0,2} +[A-Za-z0-9-]+:[^ ]+ [^ ]+ .*warning: "
    r"|Loading policy packs\.\.\.: (starting|done)$)"
)


def _tee(
    stream: IO[str], sink: IO[str], kept: list[str], keep: Callable[[str], bool] = lambda _: True
) -> None:
    for line in stream:
        kept.append(line)
        if keep(line):
            sink.write(line)
            sink.flush()


def _owned(
    argv: list[str],
    env: Mapping[str, str] | None,
    workdir: Path | None,
    stdin: str | None,
    timeout: float | None,
    *,
    tree: bool,
    merged: bool,
    on_start: Callable[[int], None] | None,
) -> subprocess.CompletedProcess[str]:
    """`argv` captured, in `workdir`, its pid handed to `on_start`; a timeout kills its tree when `tree`."""
    with subprocess.Popen(
        argv, cwd=workdir, env=dict(env) if env is not None else None, text=True, start_new_session=tree,
        stdin=subprocess.PIPE if stdin is not None else None, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
    ) as proc:  # fmt: skip
        if on_start is not None:
            on_start(proc.pid)
        try:
            stdout, stderr = proc.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            if tree:
                process.kill_tree(proc.pid)
            else:
                proc.kill()
            stdout, stderr = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout or 0, stdout, stderr) from None
    return subprocess.CompletedProcess(argv, proc.returncode, stdout or "", stderr or "")


def _shown(argv: list[str], env: Mapping[str, str] | None) -> subprocess.CompletedProcess[str]:
    """`argv` with stdout on this terminal (filtered without one) and stderr shown and kept."""
    tty = sys.stdout.isatty()
    with subprocess.Popen(
        argv, stdout=None if tty else subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ if env is None else env),
    ) as proc:  # fmt: skip
        errors: list[str] = []
        reader = threading.Thread(target=_tee, args=(proc.stderr, sys.stderr, errors), daemon=True)
        reader.start()
        if proc.stdout is not None:
            _tee(proc.stdout, sys.stdout, [], lambda line: not _REPEATS.match(line))
        reader.join()
    return subprocess.CompletedProcess(argv, proc.returncode, "", "".join(errors))


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
