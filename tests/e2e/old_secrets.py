"""A stack as trainstack made it before secrets came over SSH (issue #67): `runpod:Secret` resources in its
state, made at RunPod through GraphQL. Put in the state as the old code wrote them: their provider pickled by
Pulumi's own serializer, the value a Pulumi secret (tests/e2e/test_secrets_and_state.py uses it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pulumi.dynamic.dynamic import serialize_provider

from components import names
from harness.local import LocalRunPod
from providers.runpod.secret import SecretProvider, hash_value, reference
from tests.e2e.stacks import StackRun

SECRET_TYPE = "pulumi-python:dynamic/runpod:Secret"
SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's mark of a secret value in a deployment
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
CREATE = "mutation($input: SecretCreateInput!) { secretCreate(input: $input) { id name } }"


def _secret(plain: str) -> dict[str, str]:
    return {SIG: SECRET_SIG, "plaintext": json.dumps(plain)}


def _old_secret(run: StackRun, runpod: LocalRunPod, template: dict[str, Any], env: str) -> dict[str, Any]:
    """Make one secret at RunPod through GraphQL and the state entry the old component wrote for it."""
    name, description = names.secret_name(run.stack, env), names.secret_description(run.stack, env)
    value = f"local-demo-{env.lower()}"
    with runpod.client() as api:
        made = api.post("/graphql", json={"query": CREATE, "variables": {"input": {
            "name": name, "value": value, "description": description}}}).json()  # fmt: skip
    sid = made["data"]["secretCreate"]["id"]
    provider = serialize_provider(SecretProvider())
    inputs = {"__provider": provider, "name": name, "value": _secret(value), "description": description}
    outputs = {**inputs, "secret_id": sid, "reference": reference(name),
               "value_hash": _secret(hash_value(value)),
               "cost_per_hour": 0.0, "storage_cost_per_month": 0.0, "price_source": "none"}  # fmt: skip
    component = template["parent"]
    urn = f"{component.rsplit('::', 1)[0]}${SECRET_TYPE}::{run.stack}-secret-{env.lower()}"
    return {"urn": urn, "custom": True, "id": sid, "type": SECRET_TYPE, "inputs": inputs, "outputs": outputs,
            "parent": component, "provider": template["provider"],
            "additionalSecretOutputs": ["value", "value_hash"]}  # fmt: skip


def with_old_secrets(run: StackRun, runpod: LocalRunPod, tmp: Path) -> list[str]:
    exported = run.cli.export()
    resources = exported["deployment"]["resources"]
    template = next(r for r in resources if r["type"].endswith("runpod:Pod"))
    old = [_old_secret(run, runpod, template, env) for env in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")]
    at = resources.index(template)  # before the pod, which depended on them
    exported["deployment"]["resources"] = [*resources[:at], *old, *resources[at:]]
    path = tmp / "old-state.json"
    path.write_text(json.dumps(exported))
    run.cli.run("stack", "import", "--file", str(path), "--stack", run.stack)
    return [r["id"] for r in old]
