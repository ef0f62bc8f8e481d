"""Security policies: no plain-text secrets in pod or cluster env, hardened checkpoint buckets."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Final

from pulumi_policy import EnforcementLevel, ReportViolation, ResourceValidationArgs, ResourceValidationPolicy
from pydantic import Field

from facts import secrets
from policy.rules.common import (
    BUCKET,
    COMPUTE_TYPES,
    PolicyConfig,
    Unknown,
    config_schema,
    entries,
    kind,
    load_config,
    number,
    read,
    text,
)

# Shapes of well-known tokens, named so a message can say what was found without echoing it.
_TOKEN_SHAPES: Final = (
    ("a Hugging Face token (hf_...)", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("an API key (sk-...)", re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}")),
    ("an AWS access key id (AKIA...)", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "a GitHub token (ghp_...)",
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
    ),
    (
        "a Weights & Biases API key (40 hex digits)",
        re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{40}(?![0-9A-Za-z])"),
    ),
)
_CANDIDATE: Final = re.compile(r"[A-Za-z0-9+/_=\-]+")


class SecretsConfig(PolicyConfig):
    secret_name_patterns: tuple[str, ...] = Field(
        (
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "WANDB_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "*_TOKEN",
            "*_SECRET",
            "*_KEY",
            "*_PASSWORD",
        ),
        description="Env names (globs, case-insensitive) whose value must be a RunPod secret reference.",
    )
    allowed_names: tuple[str, ...] = Field(
        ("PUBLIC_KEY", "SSH_PUBLIC_KEY"),
        description="Env names never treated as secrets (RunPod reads PUBLIC_KEY for SSH access).",
    )
    min_token_length: float = Field(32, ge=8, description="Shortest string judged by its entropy.")
    min_entropy_bits: float = Field(
        4.0, gt=0, description="Shannon entropy (bits per character) from which a long string is a secret."
    )


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())


def _high_entropy(value: str, cfg: SecretsConfig) -> bool:
    for candidate in _CANDIDATE.findall(value):
        mixed = (
            any(c.isupper() for c in candidate)
            and any(c.islower() for c in candidate)
            and any(c.isdigit() for c in candidate)
        )
        if len(candidate) >= cfg.min_token_length and mixed and _entropy(candidate) >= cfg.min_entropy_bits:
            return True
    return False


def token_shape(value: str, cfg: SecretsConfig) -> str | None:
    """What kind of secret `value` looks like, once RunPod secret references are taken out; else None."""
    plain = secrets.REFERENCE_PATTERN.sub(" ", value)
    for label, pattern in _TOKEN_SHAPES:
        if pattern.search(plain):
            return label
    return "a long high-entropy string" if _high_entropy(plain, cfg) else None


def _secret_named(name: str, cfg: SecretsConfig) -> bool:
    upper = name.upper()
    if any(fnmatchcase(upper, allowed.upper()) for allowed in cfg.allowed_names):
        return False
    return any(fnmatchcase(upper, pattern.upper()) for pattern in cfg.secret_name_patterns)


def env_problem(name: str, value: Any, cfg: SecretsConfig) -> str | None:
    """Why this env entry leaks a secret (never quoting the value), or None when it is fine or unknown."""
    if isinstance(value, Unknown) or value is None:
        return None  # e.g. a runpod:Secret's `reference` output, resolved at `pulumi up`
    raw = value if isinstance(value, str) else str(value)
    if not raw.strip() or secrets.is_reference(raw):
        return None
    shape = None if name.upper() in (n.upper() for n in cfg.allowed_names) else token_shape(raw, cfg)
    if shape is not None:
        return f"holds a plain-text value shaped like {shape}"
    if _secret_named(name, cfg):
        return "is named like a secret but its value is not a `{{ RUNPOD_SECRET_<name> }}` reference"
    return None


def check_no_plaintext_secrets(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Pod and cluster env (and start args) hold no plain-text secret; secrets are RunPod references."""
    if args.resource_type not in COMPUTE_TYPES:
        return
    cfg = load_config(SecretsConfig, args.get_config(), report)
    if cfg is None:
        return
    noun = kind(args)
    for name, value in entries(read(args.props, "env")):
        problem = env_problem(name, value, cfg)
        if problem is not None:
            report(
                f"{noun} '{args.name}' env {name} {problem}. Plain env values are readable by anyone "
                "who can see the pod and are kept in Pulumi state. Add it to trainstack:training.secrets "
                f"and set it with `pulumi config set --secret trainstack:secrets.{name} <value>`: it then "
                "reaches the node over SSH, never the pod's env (docs/OPERATING.md, Secrets on the node).",
                None,
            )
    start_args = text(read(args.props, "args"))
    shape = token_shape(start_args, cfg) if start_args is not None else None
    if shape is not None:
        report(
            f"{noun} '{args.name}' args hold a plain-text value shaped like {shape}. Make it a stack secret "
            "(trainstack:training.secrets, `pulumi config set --secret trainstack:secrets.<NAME>`) and read "
            "the variable in the start command: the node gets it over SSH.",
            None,
        )


class BucketConfig(PolicyConfig):
    require_kms: bool = Field(False, description="Require SSE-KMS with a kms_key_id, not just SSE-S3.")
    required_lifecycle_rules: tuple[str, ...] = Field(
        ("noncurrent_expire_days", "abort_multipart_days"),
        description="lifecycle keys that must be set to a positive number of days.",
    )


def _enabled(value: Any) -> bool | None:
    """True/False for a bool, an on/off word, or a map of such flags; None when unknown."""
    if isinstance(value, Unknown):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in ("true", "enabled", "on", "yes")
    if isinstance(value, Mapping):
        flags = [_enabled(v) for _, v in entries(value)]
        return None if None in flags else bool(flags) and all(flags)
    return False


def _encryption_gaps(props: Mapping[str, Any], cfg: BucketConfig) -> list[str]:
    encryption = read(props, "encryption")
    if isinstance(encryption, Unknown):
        return []
    mode = str(encryption).lower() if encryption not in (None, False, "") else "none"
    if mode in ("none", "false", "disabled", "off"):
        return ["encryption is off (checkpoints hold model weights: set `encryption`)"]
    # The provider takes `encryption: true` plus `kms_key_id` for SSE-KMS (SSE-S3 without a key); a mode
    # string such as "aws:kms" is accepted too.
    kms_key = text(read(props, "kms_key_id"))
    if cfg.require_kms and (mode not in ("true", "aws:kms", "kms") or kms_key is None):
        return ["encryption is not SSE-KMS with a `kms_key_id` (required by `require_kms`)"]
    return []


def _lifecycle_gaps(props: Mapping[str, Any], cfg: BucketConfig) -> list[str]:
    lifecycle = read(props, "lifecycle")
    if isinstance(lifecycle, Unknown):
        return []
    missing = []
    for rule in cfg.required_lifecycle_rules:
        value = read(lifecycle, rule)
        days = number(value)
        if not isinstance(value, Unknown) and (days is None or days <= 0):
            missing.append(rule)
    if not missing:
        return []
    return [
        f"lifecycle lacks {', '.join(missing)} (versioned checkpoints and aborted multipart uploads "
        "otherwise pile up and are billed forever)"
    ]


_BUCKET_FLAGS: Final = (
    ("versioning", "versioning is off (an overwritten or deleted checkpoint cannot be recovered)"),
    ("block_public_access", "public access is not blocked (weights and data could be exposed)"),
    ("tls_only", "TLS is not enforced (`tls_only`: requests over plain HTTP must be denied)"),
)


def check_bucket_hardening(args: ResourceValidationArgs, report: ReportViolation) -> None:
    """Checkpoint buckets are versioned, encrypted, private, TLS-only and have lifecycle rules."""
    if args.resource_type != BUCKET:
        return
    cfg = load_config(BucketConfig, args.get_config(), report)
    if cfg is None:
        return
    gaps = [why for key, why in _BUCKET_FLAGS if _enabled(read(args.props, key)) is False]
    gaps += _encryption_gaps(args.props, cfg) + _lifecycle_gaps(args.props, cfg)
    if gaps:
        report(
            f"bucket '{args.name}': {'; '.join(gaps)}. Set versioning, encryption, block_public_access "
            "and tls_only to true and fill the lifecycle map on this s3:CheckpointBucket.",
            None,
        )


NO_PLAINTEXT_SECRETS = ResourceValidationPolicy(
    name="no-plaintext-secrets",
    description="Pod and cluster env hold no plain-text secrets; they reach the node over SSH instead.",
    validate=check_no_plaintext_secrets,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(SecretsConfig),
    remediation_steps=(
        "List the variable in trainstack:training.secrets and set `pulumi config set --secret "
        "trainstack:secrets.<NAME> <value>`: the node gets it over SSH, never in the pod's env."
    ),
)

BUCKET_HARDENING = ResourceValidationPolicy(
    name="checkpoint-bucket-hardening",
    description="Checkpoint buckets are versioned, encrypted, private, TLS-only, with lifecycle rules.",
    validate=check_bucket_hardening,
    enforcement_level=EnforcementLevel.MANDATORY,
    config_schema=config_schema(BucketConfig),
    remediation_steps="Turn on versioning, encryption, block_public_access, tls_only; set lifecycle days.",
)

POLICIES = (NO_PLAINTEXT_SECRETS, BUCKET_HARDENING)
