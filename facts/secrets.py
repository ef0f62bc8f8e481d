"""RunPod console secrets: their names and how env values reference them (source: `sources.SECRETS`)."""

from __future__ import annotations

import re
from typing import Final

# A shell-safe alphabet: RunPod's docs show `{{ RUNPOD_SECRET_<name> }}` with letters, digits and '_';
# we also allow '-' (stack-prefixed names use it) and nothing else, so a name never needs quoting.
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
NAME_RULE: Final = "secret names use letters, digits, '_' and '-' (1-64 chars)"
# One reference anywhere in a value; group 1 is the secret's name.
REFERENCE_PATTERN: Final = re.compile(r"\{\{\s*RUNPOD_SECRET_([A-Za-z0-9_-]{1,64})\s*\}\}")
REFERENCE_FORM: Final = "{{ RUNPOD_SECRET_<name> }}"


def reference(name: str) -> str:
    """What RunPod substitutes with the secret's value at pod start (`runpod:Secret` checks the name)."""
    return "{{ RUNPOD_SECRET_" + name + " }}"


def is_reference(value: str) -> bool:
    """The whole value is one secret reference (surrounding spaces allowed)."""
    return REFERENCE_PATTERN.fullmatch(value.strip()) is not None


def contains_reference(value: str) -> bool:
    return REFERENCE_PATTERN.search(value) is not None
