"""Issue #45: reconcile reads every stack's state without the state's passphrase, so its scheduled
workflow is not given one. A state holding a secret stays ciphertext; its resources' ids are still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from common.cachedir import cache_dir
from harness.pulumi_cli import Pulumi
from ops import reconcile

pytestmark = pytest.mark.e2e  # the real pulumi CLI, no server
SIG = "4dabf18193072939515e22adb298388d"


def test_states_are_read_without_the_passphrase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text("name: trainstack\nruntime: python\n")
    cli = Pulumi(project, tmp_path / "state")
    cli.stack_init("dev")
    cli.run("config", "set", "--secret", "token", json.dumps("s3cr3t-value"))
    config = yaml.safe_load((project / "Pulumi.dev.yaml").read_text())["config"]
    exported = cli.export()
    # Pulumi's secret signature key and value (its state format), around the passphrase's ciphertext
    secret = {SIG: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": config["trainstack:token"]["secure"]}
    stack_urn = "urn:pulumi:dev::trainstack::pulumi:pulumi:Stack::trainstack-dev"
    exported["deployment"]["resources"] = [
        {"urn": stack_urn, "custom": False,
         "type": "pulumi:pulumi:Stack", "outputs": {"token": secret}},
        {"urn": "urn:pulumi:dev::trainstack::pulumi-python:dynamic:Resource::pod-0", "custom": True,
         "id": "pod-id-0", "type": "pulumi-python:dynamic:Resource",
         "parent": stack_urn, "outputs": {"name": "pod-0"}},
    ]  # fmt: skip
    (tmp_path / "deployment.json").write_text(json.dumps(exported))
    cli.run("stack", "import", "--file", str(tmp_path / "deployment.json"))

    for key, value in cli.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PULUMI_CONFIG_PASSPHRASE")  # what the scheduled workflow runs with
    said: list[str] = []
    states = reconcile.pulumi_states(project, said.append, binary=str(cache_dir() / "bin" / "pulumi"))
    assert states == {"dev": {"pod-id-0"}}, said
    assert not said
