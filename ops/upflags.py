"""The arguments `scripts/up` hands to `pulumi up`, read the way Pulumi's CLI reads them (cobra's pflag).

Matching strings let `--skip-preview=true`, `--skip-preview=1`, `-f=true` and `-rf` through (issue #62): pflag
takes `--name=value`, `-x=value`, `-xvalue` and combined shorthands (`-rf` is `-r -f`: `-r` takes its value
only after `=`), and a flag that needs a value takes the next argument whatever it looks like (`-m -f` is the
message "-f", not -f). `parse` does the same over the table of `pulumi up`'s flags below, which
tests/ops/test_upflags_cli.py holds equal to what the CLI scripts/bootstrap built lists in `pulumi up --help`
(the hidden ones are from its source: pkg/cmd/pulumi/operations/up.go, v3.274.1).

`refusal` says which argument scripts/up refuses, and why: skipping the preview (the policy pack's budget
checks would then run only after the pods exist), a policy pack or policy config of the user's (a second
`--policy-pack`/`--policy-pack-config` may replace the stack's caps), another stack, workspace, stack config
or program (`--stack`, `--cwd`, `--config-file`, `--config`, `--client`), a template to deploy instead of the
stack (`pulumi up [template|url]`), a flag `pulumi up` does not have, and a flag without its value. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Takes = Literal["none", "value", "optional"]  # a bool flag; a value; a value only after `=` (NoOptDefVal)


@dataclass(frozen=True)
class Flag:
    name: str
    short: str = ""
    takes: Takes = "none"


def _flags(takes: Takes, *specs: str) -> tuple[Flag, ...]:
    """`"stack/s"` is --stack with the shorthand -s."""
    return tuple(Flag(name, short, takes) for name, _, short in (spec.partition("/") for spec in specs))


# `pulumi up`'s own flags and the root command's persistent ones (pkg/cmd/pulumi/pulumi.go), v3.274.1.
FLAGS: tuple[Flag, ...] = (
    *_flags(
        "none",
        "debug/d", "expect-no-changes", "config-path", "target-dependents", "exclude-dependents", "diff",
        "json/j", "run-program", "skip-config-validation", "show-config", "show-policy-remediations",
        "show-policy-exceptions", "show-replacement-steps", "show-sames", "show-secrets", "show-reads",
        "urns", "skip-preview/f", "suppress-outputs", "suppress-progress", "show-full-output", "yes/y",
        "continue-on-error", "ignore-protect", "strict", "skip-plugin-pre-install", "neo",
        "neo-task-on-failure", "copilot", "help/h",
        # the root command's
        "emoji/e", "fully-qualify-stack-names/Q", "disable-integrity-checking", "logflow", "logtostderr",
        "non-interactive",
    ),
    *_flags(
        "value",
        "stack/s", "config-file", "config/c", "secrets-provider", "client", "message/m", "target/t",
        "exclude", "replace", "target-replace", "policy-pack", "policy-pack-config", "output", "parallel/p",
        "override-env",
        "plan", "coherence-window", "exec-kind", "exec-agent",
        "event-log",  # only with PULUMI_DEBUG_COMMANDS=true
        # the root command's
        "cwd/C", "tracing", "tracing-header", "otel-traces", "profiling", "memprofilerate", "verbose/v",
        "color",
    ),
    *_flags("optional", "refresh/r", "suppress-permalink", "attach-debugger"),
)  # fmt: skip
# Not in `pulumi up --help`: hidden, deprecated (copilot) or only with PULUMI_DEBUG_COMMANDS (event-log).
HIDDEN = frozenset({"client", "output", "plan", "coherence-window", "exec-kind", "exec-agent", "event-log",
                    "tracing-header", "neo-task-on-failure", "copilot"})  # fmt: skip
_LONG = {f.name: f for f in FLAGS}
_SHORT = {f.short: f for f in FLAGS if f.short}

PREVIEW = (
    "the policy pack's budget checks would run only after the pods exist; drop the flag (scripts/up "
    "previews first and stops before anything is created)"
)
POLICY = (
    "scripts/up runs the stack's own policy pack with policy/config/<stack>.json and no other (a second pack "
    "or config could replace its caps); change the caps in that file"
)
CHOSEN = (
    "scripts/up chooses the stack, its workspace, its stack file and the program (`scripts/up STACK`); "
    "change the stack file itself, or run `trainstack pulumi` for anything else"
)
REFUSED = {
    "skip-preview": PREVIEW,
    "policy-pack": POLICY,
    "policy-pack-config": POLICY,
    **dict.fromkeys(("stack", "cwd", "config-file", "config", "client"), CHOSEN),
}


class FlagError(ValueError):
    """An argument `pulumi up` would not take (unknown flag, missing value, bad syntax); the message says."""


@dataclass(frozen=True)
class Given:
    flag: str  # the long name, or "" for a positional argument
    spelling: str  # the argument as typed (a combined `-rf` for each flag in it)
    value: str | None


def parse(args: Sequence[str]) -> list[Given]:
    """Every flag and positional argument of `pulumi up ARGS`, as pflag reads them; FlagError otherwise."""
    out: list[Given] = []
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            out += [Given("", a, a) for a in rest]
            break
        if not arg.startswith("-") or arg == "-":
            out.append(Given("", arg, arg))
        elif arg.startswith("--"):
            out.append(_long(arg, rest))
        else:
            out += _shorts(arg, rest)
    return out


def _long(arg: str, rest: list[str]) -> Given:
    name, eq, value = arg[2:].partition("=")
    if not name or name.startswith(("-", "=")):
        raise FlagError(f"{arg}: not a flag (bad syntax)")
    flag = _LONG.get(name)
    if flag is None:
        raise FlagError(f"{arg}: pulumi up has no flag --{name}")
    if eq or flag.takes != "value":
        return Given(name, arg, value if eq else None)
    if not rest:
        raise FlagError(f"{arg}: it needs a value ({arg} VALUE)")
    return Given(name, arg, rest.pop(0))


def _shorts(arg: str, rest: list[str]) -> list[Given]:
    out: list[Given] = []
    letters = arg[1:]
    while letters:
        flag = _SHORT.get(letters[0])
        if flag is None:
            raise FlagError(f"{arg}: pulumi up has no flag -{letters[0]}")
        if letters[1:2] == "=":  # -f=value
            out.append(Given(flag.name, arg, letters[2:]))
            break
        if flag.takes != "value":  # -r and the bool flags take no argument here: the next letter is a flag
            out.append(Given(flag.name, arg, None))
            letters = letters[1:]
        elif len(letters) > 1:  # -pvalue
            out.append(Given(flag.name, arg, letters[1:]))
            break
        elif rest:  # -p value
            out.append(Given(flag.name, arg, rest.pop(0)))
            break
        else:
            raise FlagError(f"{arg}: it needs a value ({arg} VALUE)")
    return out


def refusal(args: Sequence[str]) -> str | None:
    """Why scripts/up refuses these `pulumi up` arguments (one line naming the argument), or None."""
    try:
        given = parse(args)
    except FlagError as exc:
        return f"refusing {exc}; `trainstack pulumi up --help` lists pulumi up's flags"
    for g in given:
        if not g.flag:
            return (
                f"refusing {g.spelling!r}: pulumi up would deploy it as a template or URL instead of the "
                "stack; scripts/up takes one STACK and pulumi up's flags"
            )
        if g.flag in REFUSED:
            short = _LONG[g.flag].short
            if g.spelling in (f"--{g.flag}", f"-{short}") or g.spelling.startswith(f"--{g.flag}="):
                return f"refusing {g.spelling}: {REFUSED[g.flag]}"
            named = f"-{short}, --{g.flag}" if short else f"--{g.flag}"
            return f"refusing {g.spelling} ({named}): {REFUSED[g.flag]}"
    return None
