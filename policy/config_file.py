"""Check a policy config file (`--policy-pack-config`) before the Pulumi CLI reads it.

The CLI's own errors name nothing: a misspelt policy name gives "invalid enforcement level ''", a file
written as YAML "invalid character 'h' looking for beginning of value", `1e309` "cannot unmarshal number".
Here every problem names the file, the key path and the fix. The scripts run it before `pulumi`:

    python -m policy.config_file [--allow-unenforced-budget] policy/config/prod.json [...]
                                                                    exit 0 when valid, 2 with the problems

Two rules keep a budget from being switched off by accident: a key given twice anywhere in the
file is refused (JSON's last one would silently win), and a budget policy (BUDGET_POLICIES) set to
`disabled` or `advisory` is refused unless `--allow-unenforced-budget` (or the environment variable
TRAINSTACK_ALLOW_UNENFORCED_BUDGET=1, which scripts/up and scripts/preview-report pass on) says it is meant.

The file is JSON: `{"<policy name>": {"<key>": value, ..., "enforcementLevel": "advisory"}, ...}` or
`{"<policy name>": "<enforcement level>"}` (https://www.pulumi.com/docs/iac/using-pulumi/crossguard/configuration/).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from policy.rules import ALL_POLICIES
from policy.rules.common import README_HINT, PolicyConfig, model_of, settings_problems

# Each policy's config model, by the name the config file uses; None for a policy that takes no config.
CONFIG_MODELS: dict[str, type[PolicyConfig] | None] = {
    p.name: model_of(getattr(p, "config_schema", None)) for p in ALL_POLICIES
}
LEVELS = ("advisory", "mandatory", "remediate", "disabled")
LEVEL_KEY = "enforcementLevel"
# The mandatory policies that hold the money: turning one off needs the explicit override.
BUDGET_POLICIES = frozenset(
    {
        "hourly-burn-limit",
        "run-cost-limit",
        "storage-cost-limit",
        "runpod-spend-limit",
        "run-cost-within-budget",
    }
)
UNENFORCED = ("disabled", "advisory")
OVERRIDE_FLAG = "--allow-unenforced-budget"
OVERRIDE_ENV = "TRAINSTACK_ALLOW_UNENFORCED_BUDGET"
_README = README_HINT


def _non_finite(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, float) and not math.isfinite(value):
        yield path
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _non_finite(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{path}[{index}]")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


class _Pairs(list[tuple[str, Any]]):
    """A JSON object as its key-value pairs in order, duplicates kept (json's object_pairs_hook)."""


def _duplicates(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, item in value:
            where = f"{path}.{key}" if path else key
            if key in seen:
                yield where
            seen.add(key)
            yield from _duplicates(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _duplicates(item, f"{path}[{index}]")


def _as_dicts(value: Any) -> Any:
    if isinstance(value, _Pairs):
        return {key: _as_dicts(item) for key, item in value}
    if isinstance(value, list):
        return [_as_dicts(item) for item in value]
    return value


NESTED = (
    "(file): is nested deeper than Python's parser goes; a policy config is two levels deep, "
    '{"<policy name>": {"<key>": value}}: write that'
)


def _parse(text: str) -> tuple[Any, list[str]]:
    """The document, or the problems that keep it from being one (a key given twice is one)."""
    try:
        return _parse_json(text)
    except RecursionError:  # 200,000 `[` raised out of json.loads (issue #62)
        return None, [NESTED]


def _parse_json(text: str) -> tuple[Any, list[str]]:
    try:
        pairs = json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_Pairs)
        twice = [
            f"{path}: is given twice; JSON keeps only the last one, so the first is silently lost: keep one"
            for path in _duplicates(pairs, "")
        ]
        return (None, twice) if twice else (_as_dicts(pairs), [])
    except ValueError as exc:
        try:
            as_yaml = yaml.safe_load(text)
        except yaml.YAMLError:
            as_yaml = None
        if isinstance(as_yaml, Mapping) and not text.lstrip().startswith("{"):
            return None, ["(file): is YAML, not JSON; the Pulumi CLI reads JSON only: rewrite it as JSON"]
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return None, [f"(file): is not valid JSON{where} ({exc}); fix the syntax"]


def _entry_problems(name: str, entry: Any) -> list[str]:
    if isinstance(entry, str):
        return (
            []
            if entry in LEVELS
            else [f"{name}: enforcement level {entry!r}; use one of {', '.join(LEVELS)}"]
        )
    if not isinstance(entry, Mapping):
        return [f'{name}: is not an object; write {{"key": value, ...}} or an enforcement level']
    problems = []
    level = entry.get(LEVEL_KEY)
    if level is not None and level not in LEVELS:
        problems.append(f"{name}.{LEVEL_KEY}: {level!r} is not a level; use one of {', '.join(LEVELS)}")
    settings = {k: v for k, v in entry.items() if k != LEVEL_KEY}
    model = CONFIG_MODELS[name]
    if model is None:
        extra = sorted(settings)
        return problems + [f"{name}.{k}: this policy takes no config; remove it" for k in extra]
    # The pack judges the same settings with the same function (policy/rules/common.py `load_config`).
    return problems + settings_problems(name, model, settings)


def _unenforced_budget(name: str, entry: Any) -> list[str]:
    level = entry if isinstance(entry, str) else entry.get(LEVEL_KEY) if isinstance(entry, Mapping) else None
    if name not in BUDGET_POLICIES or level not in UNENFORCED:
        return []
    where = name if isinstance(entry, str) else f"{name}.{LEVEL_KEY}"
    return [
        f"{where}: {level!r} turns off a budget policy, so nothing would stop that spending; remove it, or "
        f"pass {OVERRIDE_FLAG} (or set {OVERRIDE_ENV}=1) if that is meant"
    ]


def problems_in(text: str, allow_unenforced_budget: bool = False) -> list[str]:
    """Every problem in a policy config file's text, each `<key path>: <what is wrong>; <fix>`."""
    doc, problems = _parse(text)
    if problems:
        return problems
    if not isinstance(doc, Mapping):
        return ['(file): is not a JSON object; write {"<policy name>": {...}, ...}']
    out = [f"{path}: numbers must be finite (1e309 and the like overflow); write a smaller number"
           for path in _non_finite(doc, "")]  # fmt: skip
    for name, entry in doc.items():
        if name not in CONFIG_MODELS:
            near = difflib.get_close_matches(name, CONFIG_MODELS, n=1)
            hint = f"did you mean {near[0]!r}?" if near else _README
            out.append(f"{name}: no policy of that name; fix the spelling ({hint})")
        elif not any(p.startswith(f"{name}.") for p in out):
            out += _entry_problems(name, entry)
            if not allow_unenforced_budget:
                out += _unenforced_budget(name, entry)
    return out


# The run's cap under its old names: still read (unless the stack sets the one cap), with a notice.
DEPRECATED_CAPS = {("run-cost-limit", "max_run_usd"), ("run-cost-within-budget", "max_run_cost_usd")}
RUN_CAP_KEY = "trainstack:run.max_cost_usd"


def deprecation_notices(text: str) -> list[str]:
    """A line per old run-cap key in the file, naming the one cap that replaces it."""
    doc, problems = _parse(text)
    if problems or not isinstance(doc, Mapping):
        return []
    return [
        f"{policy}.{key}: deprecated; the run's one cost cap is {RUN_CAP_KEY} in the stack config (read by "
        "the policy pack, the alerts and scripts/supervise); while both are set the policy pack holds the "
        "stricter of the two, and says which"
        for policy, key in sorted(DEPRECATED_CAPS)
        if isinstance(doc.get(policy), Mapping) and key in doc[policy]
    ]


def read_config_text(path: Path) -> tuple[str | None, list[str]]:
    """The file's text, or the problem that keeps it from being read: a missing file, bytes that are not
    UTF-8 (JSON is UTF-8; the CLI and this checker read nothing else)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return None, [f"(file): cannot be read ({exc.strerror}); check the path"]
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        return None, [
            f"(file): is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save it as "
            "UTF-8 JSON"
        ]


def _cmdline(pid: int) -> tuple[list[str], Path, int] | None:
    """A process's arguments, working directory and parent (Linux /proc); None when it cannot be read."""
    proc = Path("/proc") / str(pid)
    try:
        args = proc.joinpath("cmdline").read_bytes().decode(errors="replace").split("\0")
        cwd = Path(os.readlink(proc / "cwd"))
        status = proc.joinpath("status").read_text()
    except OSError:
        return None
    ppid = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("PPid:")), 0)
    return args, cwd, ppid


def _flag_values(args: list[str], flag: str) -> list[str]:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"{flag}=")]
    values += [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]
    return values


def passed_config(pack_dir: Path, pid: int | None = None, depth: int = 8) -> Path | None:
    """The `--policy-pack-config` file the Pulumi CLI that started this pack gave for it, read from the
    nearest ancestor process whose arguments name one (the CLI starts the language host, which starts the
    pack); each config goes with the pack given in the same position, as the CLI pairs them. None when no
    ancestor names one, or where /proc cannot be read (the engine's own check then stands)."""
    current = os.getppid() if pid is None else pid
    for _ in range(depth):
        if current <= 1:
            return None
        found = _cmdline(current)
        if found is None:
            return None
        args, cwd, parent = found
        configs = _flag_values(args, "--policy-pack-config")
        if configs:
            packs = [(cwd / p).resolve() for p in _flag_values(args, "--policy-pack")]
            mine = [c for p, c in zip(packs, configs, strict=False) if p == pack_dir.resolve()]
            chosen = mine[0] if mine else configs[0] if len(configs) == 1 else None
            return None if chosen is None else cwd / chosen
        current = parent
    return None


def refuse_at_start(pack_dir: Path, pid: int | None = None) -> None:
    """Run by the pack before it serves (policy/__main__.py): when the file the CLI was given for it has a
    problem, print each as this checker does (file, key path, fix) and exit 2, before the engine reads the
    file and says something that names no key (every path into Pulumi gets this message)."""
    path = passed_config(pack_dir, pid)
    if path is None:
        return
    text, problems = read_config_text(path)
    if text is not None:
        problems = problems_in(text, allow_unenforced_budget=os.environ.get(OVERRIDE_ENV) == "1")
    if problems:
        for problem in problems:
            print(f"{path}: {problem}", file=sys.stderr)
        print(
            f"{path}: refused by trainstack's policy pack; fix it, then run the command again",
            file=sys.stderr,
        )
        sys.exit(2)


def file_report(path: Path, allow_unenforced_budget: bool = False) -> tuple[list[str], list[str]]:
    """(problems, deprecation notices) of the policy config file at `path`; one problem when it cannot be
    read as UTF-8 text (read_config_text)."""
    text, problems = read_config_text(path)
    if text is None:
        return problems, []
    return problems_in(text, allow_unenforced_budget=allow_unenforced_budget), deprecation_notices(text)


def main(argv: list[str] | None = None) -> int:
    files = list(sys.argv[1:] if argv is None else argv)
    allow = os.environ.get(OVERRIDE_ENV) == "1"
    if OVERRIDE_FLAG in files:
        files.remove(OVERRIDE_FLAG)
        allow = True
    bad = 0
    for name in files:
        problems, notices = file_report(Path(name), allow_unenforced_budget=allow)
        for notice in notices:
            print(f"{name}: warning: {notice}", file=sys.stderr)
        for problem in problems:
            print(f"{name}: {problem}", file=sys.stderr)
        bad += bool(problems)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
