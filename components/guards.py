"""Checks the program runs before it registers anything: the stack's name, and no credential in plain text.

Both are refused before the first resource so a bad value can never rent a pod first and fail later:
- the stack name becomes part of every RunPod name and rendered path, so it is held to `[a-z0-9-]`;
- `trainstack:secrets.*` and `runpod:apiKey` must be Pulumi secrets (the engine tells the program which
  keys are: `pulumi.runtime.config.is_config_secret`), and no other config value may hold a credential
  (stackconfig/credentials.py lists the shapes). Problems name the key path, never the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from stackconfig.config import NAMESPACE, SECRETS_KEY, ConfigError, ConfigProblem
from stackconfig.credentials import find_credentials

STACK_NAME_RE = re.compile(r"[a-z0-9][a-z0-9-]*")  # what components/render.py accepts
SECRET_ONLY_KEYS = frozenset({"runpod:apiKey"})  # besides every trainstack:secrets.<NAME>


def stack_name_problems(stack: str) -> list[ConfigProblem]:
    """The stack name is part of every RunPod resource name (`trainstack-<stack>-pod-0`), secret name and
    rendered script; refuse what those cannot hold before anything is rented."""
    if STACK_NAME_RE.fullmatch(stack):
        return []
    fix = (
        "use lowercase letters, digits and '-', starting with a letter or digit (the name becomes part of "
        "every RunPod resource name): `pulumi stack init <name>`, e.g. dev-red"
    )
    return [ConfigProblem(f"stack {stack!r}", fix)]


def _must_be_secret(key: str) -> bool:
    namespace, _, name = key.partition(":")
    return key in SECRET_ONLY_KEYS or (namespace == NAMESPACE and name.startswith(f"{SECRETS_KEY}."))


def _parsed(value: str) -> Any:
    """Objects and lists arrive as JSON text; scan their parts so the problem names the exact path."""
    if value[:1] in "[{":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def plaintext_problems(config: Mapping[str, str], is_secret: Callable[[str], bool]) -> list[ConfigProblem]:
    """Secret-only keys stored in plain text, and credential shapes in any other plain-text value."""
    problems: list[ConfigProblem] = []
    for key in sorted(config):
        if is_secret(key):
            continue
        if _must_be_secret(key):
            fix = (
                f"is stored in plain text in the stack file; remove it with `pulumi config rm {key}`, set it "
                f"with `pulumi config set --secret {key} <value>`, and rotate it (the plain value is in the "
                "file's history)"
            )
            problems.append(ConfigProblem(key, fix))
            continue
        for path, kind in find_credentials(_parsed(config[key]), key):
            fix = (
                f"holds what looks like a {kind} in plain text; remove it from the stack file and rotate it, "
                "then pass it as a secret: add its env name to trainstack:training.secrets and set "
                f"`pulumi config set --secret {NAMESPACE}:{SECRETS_KEY}.<NAME> <value>`"
            )
            problems.append(ConfigProblem(path, fix))
    return problems


def check_before_registering(stack: str) -> None:
    """Raise ConfigError for a bad stack name or a plain-text credential in this program's config."""
    import pulumi.runtime.config as runtime_config

    config = dict(runtime_config.CONFIG.get())
    problems = stack_name_problems(stack) + plaintext_problems(config, runtime_config.is_config_secret)
    if problems:
        raise ConfigError(problems)
