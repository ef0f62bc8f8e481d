"""Shell completion of the one command line from its own parsers (argcomplete): command names, the flags of
the commands ops/cli.py parses, and stack names from stacks/ wherever a STACK comes first.

    eval "$(trainstack completion bash)"      # in ~/.bashrc; zsh, fish and tcsh likewise

The shell runs `trainstack` with argcomplete's `_ARGCOMPLETE` environment; `answer` prints the candidates
and exits before any command runs. The commands whose own package parses their flags (forecast, watch, ...)
complete their name and their STACK here.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

SHELLS = ("bash", "zsh", "fish", "tcsh")
# The commands whose first argument is a stack (completed from stacks/).
STACK_FIRST = ("forecast", "watch", "logs", "ssh", "supervise", "preview-report")
HELP = """\
Print the code that makes a shell complete trainstack's commands, flags and stack names (argcomplete, from
these parsers). Add to ~/.bashrc: eval "$(trainstack completion bash)" (zsh, fish, tcsh: the same)."""


def _stacks(**_: object) -> list[str]:
    from stackconfig import files

    return files.stack_names(files.STACKS_DIR)


def stack_names(action: argparse.Action) -> argparse.Action:
    """`action` (a STACK argument) completed from the stack files."""
    action.completer = _stacks  # type: ignore[attr-defined]
    return action


def shellcode(shell: str) -> int:
    """The code that makes `shell` complete `trainstack` and `scripts/trainstack`."""
    import argcomplete

    print(argcomplete.shellcode(["trainstack", "scripts/trainstack"], shell=shell))
    return 0


def answer(parser: Callable[[], argparse.ArgumentParser], **how: Any) -> None:
    """Answer the shell's completion request and exit; nothing when no shell asked. `how`: argcomplete's
    `output_stream` and `exit_method` (tests)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser(), **how)
