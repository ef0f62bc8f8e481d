"""Each resource names its outputs once, as `pulumi.Output[...]` attributes: its `output_names` and its
provider's `output_keys` (what diff ignores) come from them (providers/resource.py), and its provider's
create, read and update return them through `CheckedProvider.outputs`, which refuses a key the resource does
not declare and one it declares but leaves out (held below for every provider without booting anything: the
helper on each real provider, that it can fail, and an AST walk that finds no outs written by hand)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar

import pulumi
import pytest

from common.contract import COST_KEYS
from providers.delivery.node_files import NodeFiles
from providers.delivery.secrets_file import SecretsFile
from providers.resource import CheckedProvider, TypedResource
from providers.runpod.cluster import InstantCluster
from providers.runpod.pod import Pod
from providers.runpod.registry import RegistryAuth
from providers.runpod.secret import Secret
from providers.runpod.volume import NetworkVolume
from providers.s3.bucket import CheckpointBucket

REPO = Path(__file__).resolve().parents[2]
RESOURCES = (
    Pod,
    InstantCluster,
    NetworkVolume,
    Secret,
    RegistryAuth,
    CheckpointBucket,
    NodeFiles,
    SecretsFile,
)


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.__name__)
def test_the_output_attributes_are_the_one_list(resource: type[TypedResource]) -> None:
    provider = resource.provider_factory
    declared = {k for k, kind in vars(resource)["__annotations__"].items() if "pulumi.Output[" in str(kind)}
    assert set(resource.output_names) == declared
    keys = provider.output_keys  # type: ignore[attr-defined]
    inputs = set(provider.args_model.model_fields)  # type: ignore[attr-defined]
    assert keys and keys <= declared and not keys & inputs and not keys & set(COST_KEYS)
    # a secret output is declared too (or is a secret input), so it is never left out of either list
    assert set(resource.secret_outputs) <= declared | inputs


def test_a_new_resource_gives_its_provider_the_outputs_that_are_not_inputs() -> None:
    class Thing(TypedResource, module="test", name="Thing"):
        provider_factory = type("ThingProvider", (Pod.provider_factory,), {})
        made_id: pulumi.Output[str]
        image: pulumi.Output[str]  # an input the provider echoes: diff still compares it
        cost_per_hour: pulumi.Output[float]
        note: ClassVar[str] = "not an output"

    assert Thing.output_names == ("made_id", "image", "cost_per_hour")
    assert Thing.provider_factory.output_keys == frozenset({"made_id"})  # type: ignore[attr-defined]


VERBS = ("CreateResult", "ReadResult", "UpdateResult")


def _provider(resource: type[TypedResource]) -> CheckedProvider:
    factory = resource.provider_factory
    assert isinstance(factory, type) and issubclass(factory, CheckedProvider)
    return factory.__new__(factory)  # the helper reads class attributes only: no client, no settings


def test_every_resource_module_is_held() -> None:
    declared = {cls.__name__ for cls in RESOURCES}
    found = {
        node.name
        for path in (REPO / "providers").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "TypedResource" for b in node.bases)
    }
    assert found == declared


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.__name__)
def test_the_declared_outputs_pass_and_nothing_else_does(resource: type[TypedResource]) -> None:
    provider = _provider(resource)
    assert provider.output_keys and provider.output_keys <= provider.declared_outputs
    assert provider.declared_outputs == frozenset(resource.output_names)
    full = dict.fromkeys(provider.output_keys, "x")
    assert provider.outputs({"name": "n"}, **full) == {"name": "n", **full}
    dropped = sorted(provider.output_keys)[0]
    with pytest.raises(TypeError, match=rf"misses ones it declares \(\['{dropped}'\]\)"):
        provider.outputs({}, **{k: v for k, v in full.items() if k != dropped})
    with pytest.raises(TypeError, match=r"does not declare \(\['surprise'\]\)"):
        provider.outputs({}, **full, surprise=1)


def outs_written_by_hand(tree: ast.AST) -> list[str]:
    """Where a verb's result gets a dict literal with keys, or an `_outs` returns anything but
    `self.outputs(...)`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in VERBS:
            literal = [a for a in node.args if isinstance(a, ast.Dict) and a.keys]
            found += [f"line {node.lineno}: a verb's result with its outs written by hand" for _ in literal]
        if isinstance(node, ast.FunctionDef) and node.name == "_outs":
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return)):
                call = ret.value
                if not (isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "outputs"):
                    found.append(f"line {ret.lineno}: `_outs` returns its outs without self.outputs")
    return found


def test_no_provider_writes_its_outs_by_hand() -> None:
    found = {
        str(path.relative_to(REPO)): hits
        for path in sorted((REPO / "providers").rglob("*.py"))
        if (hits := outs_written_by_hand(ast.parse(path.read_text())))
    }
    assert found == {}


@pytest.mark.parametrize(
    "sample",
    [
        'def _outs(self, props):\n    return {**props, "volume_id": v.id}\n',
        'def create(self, props):\n    return CreateResult(i, {"pod_id": i})\n',
    ],
)
def test_the_walk_can_fail(sample: str) -> None:
    assert outs_written_by_hand(ast.parse(sample))
    assert not outs_written_by_hand(
        ast.parse("def _outs(self, p):\n    return self.outputs(p, volume_id=1)\n")
    )
