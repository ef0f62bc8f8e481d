"""The type tokens of common/contract.py are the ones the providers declare and Pulumi stores."""

from __future__ import annotations

from common import contract
from providers.delivery.node_files import NodeFiles
from providers.delivery.secrets_file import SecretsFile
from providers.runpod.cluster import InstantCluster
from providers.runpod.pod import Pod
from providers.runpod.registry import RegistryAuth
from providers.runpod.secret import Secret
from providers.runpod.volume import NetworkVolume
from providers.s3.bucket import CheckpointBucket


def test_each_resource_class_is_declared_with_its_token() -> None:
    classes = (
        Pod,
        InstantCluster,
        NetworkVolume,
        Secret,
        RegistryAuth,
        CheckpointBucket,
        NodeFiles,
        SecretsFile,
    )
    # pulumi.dynamic.Resource turns the class keywords into `dynamic/<module>:<name>`; the engine adds the
    # language's `pulumi-python:` prefix
    declared = {f"pulumi-python:{c._resource_type_name}" for c in classes}
    assert declared == {t.type for t in contract.RESOURCES}
    assert contract.POD.type == "pulumi-python:dynamic/runpod:Pod"
    assert contract.short_type(contract.BUCKET.type) == contract.BUCKET.short == "s3:CheckpointBucket"
