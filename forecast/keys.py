"""The key paths `scripts/forecast --set` takes, checked against the stack config's models before the value
is set: a path given short (`model.parameters`) completes to the one real key it ends
(`training.model.parameters`), and one that names no key is refused with the closest real
key path (issue #68: `--set model.parameters=70e9` was answered "did you mean trainstack:cluster.nodes?").
"""

from __future__ import annotations

import difflib
import typing
from functools import cache

from pydantic import BaseModel

from stackconfig.config import NAMESPACE, StackConfig
from stackconfig.loader import KNOWN_KEYS


class KeyError_(ValueError):
    """A key path that names no key of the stack config; the message says the closest one."""


def _section(annotation: object) -> type[BaseModel] | None:
    for kind in (annotation, *typing.get_args(annotation)):
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            return kind
    return None


@cache
def key_paths() -> tuple[str, ...]:
    """Every key path of the stack config, sections and values (`cluster`, `cluster.nodes`, ...)."""
    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            path = f"{prefix}{name}"
            out.append(path)
            sub = _section(info.annotation)
            if sub is not None:
                walk(sub, f"{path}.")

    for top, info in StackConfig.model_fields.items():
        name = "s3EndpointUrl" if top == "s3_endpoint_url" else top
        if name not in KNOWN_KEYS:
            continue
        out.append(name)
        sub = _section(info.annotation)
        if sub is not None:
            walk(sub, f"{name}.")
    return tuple(out)


def _is_section_path(path: str) -> bool:
    return any(p.startswith(path + ".") for p in key_paths())


def resolve(key: str) -> list[str]:
    """The key path's parts under `trainstack:`, completed where the path given is the end of exactly one real
    key path; KeyError_ with the closest real path where it names none. Below a value that is itself a map
    (a node's `env`, say) any key is taken."""
    path = key.strip().removeprefix(f"{NAMESPACE}:")
    paths = key_paths()
    if path in paths:
        return path.split(".")
    # below a map-valued key (env: {NAME: value}): the path's known prefix is a value, not a section
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:i])
        if head in paths and not _is_section_path(head):
            return parts
    # a bare name is not completed (`nodes` could be any section's): it gets the did-you-mean below
    ends = [p for p in paths if p.endswith("." + path)] if len(parts) > 1 else []
    if len(ends) == 1:
        return ends[0].split(".")
    if len(ends) > 1:
        raise KeyError_(
            f"{NAMESPACE}:{path} is the end of several keys: {', '.join(ends)}; write the whole path"
        )
    # the closest whole path, else the path whose last part is closest to the one given
    close = difflib.get_close_matches(path, paths, n=1, cutoff=0.6)
    if not close:
        by_leaf = {p.rsplit(".", 1)[-1]: p for p in reversed(paths)}
        leaf = difflib.get_close_matches(parts[-1], list(by_leaf), n=1, cutoff=0.6)
        close = [by_leaf[leaf[0]]] if leaf else []
    hint = f"did you mean {NAMESPACE}:{close[0]}? " if close else ""
    raise KeyError_(
        f"{NAMESPACE}:{path} is no key of the stack config; {hint}(the keys: docs/FORECAST.md, stackconfig/)"
    )
