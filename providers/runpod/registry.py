"""`runpod:RegistryAuth`: a container registry credential (`/v2/registries`) for pulling a private image.

RunPod's v2 API has create, list, get and delete, and no update: every change replaces the credential.
Username and password are write-only on RunPod's side; here the password travels as a Pulumi secret input
and is sent only in the create body. Outputs never hold it: change detection compares a salted HMAC kept
as `password_hash` (itself a Pulumi secret), as `runpod:Secret` does for its value (runpod/secret.py).
Instant Clusters cannot use one (CreateClusterRequest: "Private registries are not yet supported for
clusters"); the stack config refuses that combination at preview (stackconfig/rules.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult

from common import contract
from providers.resource import ResourceInputs, TypedResource
from providers.runpod.base import RunPodProvider, args_of, is_unknown
from providers.runpod.inputs import RegistryAuthInputs
from providers.runpod.models import RegistryAuthSpec
from providers.runpod.secret import hash_value, matches


class RegistryAuthProvider(RunPodProvider):
    """Lifecycle of `runpod:RegistryAuth`; any change replaces (RunPod has no update)."""

    args_model = RegistryAuthSpec
    replace_keys = frozenset({"name", "username"})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = sorted(k for k in self.replace_keys if olds.get(k) != news.get(k))
        password = news.get("password")
        if is_unknown(password) or not matches(str(password), olds.get("password_hash")):
            replaces.append("password")
        return DiffResult(changes=bool(replaces), replaces=replaces)

    def create(self, props: dict[str, Any]) -> CreateResult:
        from providers.runpod.records import RegistryCreate

        args = args_of(RegistryAuthSpec, props)
        body = RegistryCreate(name=args.name, username=args.username, password=args.password)
        with self.client() as client:
            created = client.create_registry(body)
        return CreateResult(created.id, self._outs(props, created.id, hash_value(args.password)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            found = [r for r in client.list_registries() if r.id == id_]
        if not found:
            return ReadResult(None, {})
        return ReadResult(id_, self._outs({**props, "name": found[0].name}, id_, props.get("password_hash")))

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        with self.client() as client:
            client.delete_registry(id_)  # already gone (404) is success

    def _outs(self, props: Mapping[str, Any], registry_id: str, password_hash: Any) -> dict[str, Any]:
        kept = {k: v for k, v in self.carried(props).items() if k != "password"}  # never the plain value
        return self.outputs(kept, registry_id=registry_id, password_hash=password_hash)


class RegistryAuth(TypedResource, module=contract.REGISTRY.module, name=contract.REGISTRY.name):
    """A RunPod registry credential (`pulumi-python:dynamic/runpod:RegistryAuth`); `password` is a secret."""

    registry_id: pulumi.Output[str]
    password_hash: pulumi.Output[str]  # a secret output
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]
    price_source: pulumi.Output[str]

    provider_factory = RegistryAuthProvider
    secret_outputs = ("password", "password_hash")

    def props_of(self, inputs: ResourceInputs) -> dict[str, Any]:
        assert isinstance(inputs, RegistryAuthInputs)
        return {**inputs.to_props(), "password": pulumi.Output.secret(inputs.password)}
