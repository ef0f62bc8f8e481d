"""A stack made before secrets came over SSH holds `runpod:Secret` resources (made through RunPod's GraphQL).
Once GraphQL answers 410 Gone, `pulumi up` (what scripts/up runs) carries the stack over with no manual step:
each old secret is dropped from the state with a line naming what is left in the RunPod console, and
`pulumi destroy` (scripts/down's) takes the stack down; reconcile lists around the missing GraphQL
(issue #67). The old resources are put in the state as the old code wrote them: its provider pickled by
Pulumi's own serializer, the value a Pulumi secret."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pulumi.dynamic.dynamic import serialize_provider

from components import names
from harness.local import LocalRunPod
from harness.pulumi_cli import REPO, run_killing_tree
from providers.runpod.secret import SecretProvider, hash_value, reference
from tests.e2e.reliability import Report, orphans
from tests.e2e.stacks import StackRun, open_stack

pytestmark = pytest.mark.e2e

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


def _with_old_secrets(run: StackRun, runpod: LocalRunPod, tmp: Path) -> list[str]:
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


def test_an_old_stacks_secrets_are_dropped_once_graphql_is_gone(
    tmp_path: Path, runpod: LocalRunPod, moto_s3: str, report: Report
) -> None:
    runpod.admin.reset()
    runpod.admin.limits(ratePerMinute=100000, graphql="on")  # as RunPod answered when the stack was made
    run = open_stack("dev", tmp_path, runpod, moto_s3, passphrase=True)
    run.up()
    ids = _with_old_secrets(run, runpod, tmp_path)
    assert sum(r["type"] == SECRET_TYPE for r in run.cli.resources()) == 2

    runpod.admin.limits(graphql="gone")
    carried = run.up()  # scripts/up's `pulumi up`: no manual step
    said = carried.stdout + carried.stderr
    for sid in ids:
        assert sid in said and "dropped from the state without deleting it" in said
    assert "trainstack-dev-aws_access_key_id" in said and "RunPod console" in said
    assert not [r for r in run.cli.resources() if r["type"] == SECRET_TYPE]
    assert sorted(s["id"] for s in runpod.admin.live()["secrets"]) == sorted(ids)  # left for a person
    run.up("--expect-no-changes")

    argv = [str(REPO / "scripts/reconcile"), "--cwd", str(run.cli.project)]
    swept = run_killing_tree(argv, 300, env=run.cli.env())
    assert swept.returncode in (0, 1), swept.stderr  # 1: resources no state holds (the two secrets' kin)
    assert "RunPod console secrets not listed: GraphQL, their only API, answered HTTP 410" in swept.stderr

    run.destroy()  # scripts/down's `pulumi destroy`
    assert orphans(run) == [] and runpod.admin.live()["pods"] == []
    report.record(
        "secrets: an older stack's runpod:Secret with GraphQL 410",
        "up dropped both from the state, naming them; destroy and reconcile passed",
        [],
        [],
        runs=3,
    )
