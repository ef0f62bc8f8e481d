"""The tests' stacks encrypt their secrets with a KMS key in the suite's own moto, not with a passphrase.

Pulumi's passphrase secrets manager derives its key with PBKDF2-SHA256 at 1,000,000 rounds
(sdk/go/common/resource/config/crypt.go, `symmetricCrypter`), once in every CLI process that reads or writes a
secret: `up`, `preview`, `refresh`, `destroy`, `stack output --show-secrets`, `config set --secret`. That is
~0.19 CPU-s a process on the suite's machines, the largest part of a short CLI command (`pulumi config set
--secret`: 0.32 CPU-s with the passphrase, 0.14 with this key; issue #47). A stack made with
`--secrets-provider awskms://...` instead asks KMS once per process to decrypt its data key: one request to
moto, which serves KMS on the same port as S3.

This is the provider a team on AWS would pick, and a real one: the CLI encrypts and decrypts with it exactly
as with the passphrase (Pulumi's "cloud" secrets manager). The passphrase stays where it is what is tested:
scripts/up's local demo (tests/e2e/test_demo_trains.py, test_restart.py, test_up_output.py) and
tests/e2e/test_secrets_and_state.py, which scans the state and the logs for every secret.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any
from urllib.parse import urlencode

ALIAS = "alias/trainstack-tests"
REGION = "us-east-1"
_clients: dict[tuple[str, str | None], Any] = {}  # a KMS client per moto endpoint, made once by this process
_lock = threading.Lock()


def secrets_provider(endpoint: str, ca_bundle: str | None = None) -> str:
    """The `--secrets-provider` URL of the tests' key in the moto at `endpoint`, made there when missing.

    Asked of moto on every call (one request; the client is kept): a moto restarted on the same endpoint
    keeps nothing, and a key remembered as made would be one the CLI can no longer find (issue #62). The CLI
    reads the AWS credentials from its environment (the tests' `testing` pair) and, for a moto over HTTPS,
    its certificate from AWS_CA_BUNDLE, as the S3 clients do."""
    with _lock:
        kms = _clients.get((endpoint, ca_bundle))
        if kms is None:
            kms = _clients[(endpoint, ca_bundle)] = _client(endpoint, ca_bundle)
        _make_key(kms)
        query = urlencode({"region": REGION, "endpoint": endpoint})
        return f"awskms://{ALIAS}?{query}"


def _client(endpoint: str, ca_bundle: str | None) -> Any:
    import boto3

    return boto3.client(
        "kms",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 (moto's documented test credentials)
        verify=ca_bundle or None,
    )


def _make_key(kms: Any) -> None:
    """The alias and its key, unless this moto has them (made by another process of the suite, or before)."""
    try:
        kms.describe_key(KeyId=ALIAS)
        return
    except kms.exceptions.NotFoundException:
        pass
    key = kms.create_key(Description="trainstack tests: stack secrets")["KeyMetadata"]["KeyId"]
    # Made meanwhile by another worker: theirs serves as well.
    with contextlib.suppress(kms.exceptions.AlreadyExistsException):
        kms.create_alias(AliasName=ALIAS, TargetKeyId=key)
