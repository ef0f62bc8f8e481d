"""Security policies: plain-text secrets in env, checkpoint bucket hardening."""

from __future__ import annotations

import pytest

from policy.rules.security import BUCKET_HARDENING, NO_PLAINTEXT_SECRETS
from tests.policy.factories import BUCKET, CLUSTER, POD, UNKNOWN_STR, bucket, check_resource, cluster, pod

# Fake token-shaped values, made up for these tests.
LEAKS = {
    "MY_HF": "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567",
    "OPENAI": "sk-" + "proj-Zx81Qw9LmN2oP3rS4tU5vW6xY7",
    "AWS_ID": "AKIA" + "IOSFODNN7EXAMPLE",
    "GH": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "WANDB": "0123456789abcdef0123456789abcdef01234567",
    "AWS_SECRET": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
}


class TestNoPlaintextSecrets:
    def test_references_and_ordinary_values_pass(self) -> None:
        env = {
            "HF_TOKEN": "{{ RUNPOD_SECRET_hf_token }}",
            "WANDB_API_KEY": "{{RUNPOD_SECRET_wandb}}",
            "PUBLIC_KEY": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl",
            "NCCL_SOCKET_IFNAME": "ens1",
            "CHECKPOINT_DIR": "/workspace/checkpoints/llama-70b-run-2026-11-29",
            "RUN_ID": "3f2b8c4e-1d2a-4b7e-9c3f-5a6b7c8d9e0f",
            "HF_HOME": "",
        }
        assert check_resource(NO_PLAINTEXT_SECRETS, POD, pod(env=env)).calls == []

    @pytest.mark.parametrize("name", sorted(LEAKS))
    def test_token_shaped_values_fail_without_echoing_them(self, name: str) -> None:
        value = LEAKS[name]
        reports = check_resource(NO_PLAINTEXT_SECRETS, POD, pod(env={name: value}), name="node-0")
        assert len(reports.calls) == 1
        assert f"pod 'node-0' env {name} holds a plain-text value shaped like" in reports.text
        assert f"trainstack:secrets.{name}" in reports.text  # the fix: delivered over SSH (issue #67)
        assert value not in reports.text
        assert value[:12] not in reports.text and value[-8:] not in reports.text

    @pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD"])
    def test_secret_names_need_a_reference(self, name: str) -> None:
        secret = "hunter2-not-a-reference"
        reports = check_resource(NO_PLAINTEXT_SECRETS, CLUSTER, cluster(env={name: secret}), name="c")
        assert f"cluster 'c' env {name} is named like a secret" in reports.text
        assert secret not in reports.text

    def test_secret_inside_a_longer_value_is_found(self) -> None:
        value = "Bearer " + LEAKS["MY_HF"]
        reports = check_resource(NO_PLAINTEXT_SECRETS, POD, pod(env={"AUTH_HEADER": value}))
        assert "Hugging Face token" in reports.text and LEAKS["MY_HF"] not in reports.text

    def test_token_in_start_args_fails_without_echo(self) -> None:
        args = f"python train.py --hf-token {LEAKS['MY_HF']}"
        reports = check_resource(NO_PLAINTEXT_SECRETS, POD, pod(args=args))
        assert "args hold a plain-text value" in reports.text and LEAKS["MY_HF"] not in reports.text

    def test_patterns_come_from_config(self) -> None:
        config = {"secret_name_patterns": ["*_CRED"], "allowed_names": ["PUBLIC_KEY"]}
        props = pod(env={"DB_CRED": "plain", "HF_TOKEN": "plain"})
        reports = check_resource(NO_PLAINTEXT_SECRETS, POD, props, config)
        assert len(reports.calls) == 1 and "DB_CRED" in reports.text

    def test_unknown_env_values_are_tolerated(self) -> None:
        props = pod(env={"HF_TOKEN": UNKNOWN_STR, "OTHER": "x"})
        assert check_resource(NO_PLAINTEXT_SECRETS, POD, props).calls == []
        assert check_resource(NO_PLAINTEXT_SECRETS, POD, pod(env=UNKNOWN_STR, args=UNKNOWN_STR)).calls == []

    def test_other_types_are_ignored(self) -> None:
        assert check_resource(NO_PLAINTEXT_SECRETS, BUCKET, {"env": {"HF_TOKEN": "x"}}).calls == []


class TestBucketHardening:
    def test_hardened_bucket_passes(self) -> None:
        assert check_resource(BUCKET_HARDENING, BUCKET, bucket()).calls == []

    def test_every_gap_is_named(self) -> None:
        props = bucket(
            versioning=False,
            encryption="none",
            block_public_access={"block_public_acls": True, "restrict_public_buckets": False},
            tls_only=False,
            lifecycle={"archive_after_days": 90.0},
        )
        reports = check_resource(BUCKET_HARDENING, BUCKET, props, name="ckpt")
        assert len(reports.calls) == 1
        text = reports.text
        assert text.startswith("bucket 'ckpt': versioning is off")
        for gap in ("public access is not blocked", "TLS is not enforced", "encryption is off"):
            assert gap in text
        assert "noncurrent_expire_days, abort_multipart_days" in text

    def test_missing_flags_fail(self) -> None:
        props = {"bucket_name": "b", "region": "us-east-1"}
        reports = check_resource(BUCKET_HARDENING, BUCKET, props)
        assert "versioning is off" in reports.text and "lifecycle lacks" in reports.text

    def test_require_kms_from_config(self) -> None:
        props = bucket(encryption="AES256", kms_key_id=None)
        assert check_resource(BUCKET_HARDENING, BUCKET, props).calls == []
        reports = check_resource(BUCKET_HARDENING, BUCKET, props, {"require_kms": True})
        assert "SSE-KMS" in reports.text

    def test_provider_form_true_plus_kms_key_is_sse_kms(self) -> None:
        # providers/s3 takes `encryption: true` and a `kms_key_id` for SSE-KMS; without the key it is SSE-S3.
        kms = bucket(encryption=True, kms_key_id="alias/ckpt")
        assert check_resource(BUCKET_HARDENING, BUCKET, kms, {"require_kms": True}).calls == []
        sse_s3 = bucket(encryption=True, kms_key_id=None)
        assert "SSE-KMS" in check_resource(BUCKET_HARDENING, BUCKET, sse_s3, {"require_kms": True}).text

    def test_unknown_values_are_tolerated(self) -> None:
        props = bucket(versioning=UNKNOWN_STR, encryption=UNKNOWN_STR, lifecycle=UNKNOWN_STR)
        assert check_resource(BUCKET_HARDENING, BUCKET, props).calls == []
