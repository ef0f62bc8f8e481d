"""`runpod:Secret`: a RunPod console secret, referenced from env as `{{ RUNPOD_SECRET_<name> }}`.

The value travels as a Pulumi secret input and is sent to RunPod only in GraphQL variables. Outputs
never hold it: change detection compares a salted, slow hash (PBKDF2) kept as `value_hash`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as pysecrets
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, Resource, UpdateResult

from providers.runpod.base import RunPodProvider, args_of, is_unknown
from providers.runpod.models import SecretArgs

_OUTPUTS = frozenset({"secret_id", "reference", "value_hash"})
_ITERATIONS = 200_000


def reference(name: str) -> str:
    """How pods refer to the secret in env values; RunPod substitutes it at pod start."""
    return "{{ RUNPOD_SECRET_" + name + " }}"


def hash_value(value: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else pysecrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", value.encode(), salt, _ITERATIONS)
    return f"pbkdf2-sha256${_ITERATIONS}${salt.hex()}${digest.hex()}"


def matches(value: str, stored: Any) -> bool:
    """Whether `value` is the one `stored` (a `hash_value` result) was computed from."""
    try:
        scheme, rounds, salt_hex, digest_hex = str(stored).split("$")
        digest = hashlib.pbkdf2_hmac("sha256", value.encode(), bytes.fromhex(salt_hex), int(rounds))
    except ValueError:
        return False
    return scheme == "pbkdf2-sha256" and hmac.compare_digest(digest.hex(), digest_hex)


class SecretProvider(RunPodProvider):
    """Lifecycle of `runpod:Secret`; names are immutable (replace), the value updates in place."""

    args_model = SecretArgs
    # RunPod has no call to change a name or description: both replace. Names are unique, so the
    # old secret must go before the new one can take its name.
    replace_keys = frozenset({"name", "description"})
    output_keys = _OUTPUTS
    delete_before_replace = True

    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        result = super().check(olds, news)
        name = result.inputs.get("name")
        if not result.failures and isinstance(name, str) and not is_unknown(name):
            result.inputs["reference"] = reference(name)  # known at preview, for pod env
        return result

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = sorted(k for k in self.replace_keys if olds.get(k) != news.get(k))
        value = news.get("value")
        value_changed = is_unknown(value) or not matches(str(value), olds.get("value_hash"))
        return DiffResult(
            changes=bool(replaces) or value_changed,
            replaces=replaces,
            delete_before_replace=True if replaces else None,
        )

    def create(self, props: dict[str, Any]) -> CreateResult:
        args = args_of(SecretArgs, props)
        with self.client() as client:
            created = client.create_secret(args.name, args.value, args.description)
        return CreateResult(created.id, self._outs(props, created.id, hash_value(args.value)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            found = [s for s in client.list_secrets() if s.id == id_]
        if not found:
            return ReadResult(None, {})
        # The value cannot be read back; the stored hash still describes what we last wrote.
        return ReadResult(id_, self._outs({**props, "name": found[0].name}, id_, props.get("value_hash")))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = args_of(SecretArgs, news)
        stored = olds.get("value_hash")
        if not matches(args.value, stored):
            with self.client() as client:
                client.update_secret_value(id_, args.value)
            stored = hash_value(args.value)
        return UpdateResult(self._outs(news, id_, stored))

    def delete(self, id_: str, _props: dict[str, Any]) -> None:
        with self.client() as client:
            client.delete_secret(id_)

    def _outs(self, props: Mapping[str, Any], secret_id: str, value_hash: Any) -> dict[str, Any]:
        kept = {k: v for k, v in self.carried(props).items() if k != "value"}  # never the plain value
        return {
            **kept,
            "secret_id": secret_id,
            "reference": reference(str(props["name"])),
            "value_hash": value_hash,
        }


class Secret(Resource, module="runpod", name="Secret"):
    """A RunPod secret (`pulumi-python:dynamic/runpod:Secret`); `value` is always a Pulumi secret."""

    secret_id: pulumi.Output[str]
    reference: pulumi.Output[str]
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]

    def __init__(
        self, name: str, props: Mapping[str, Any], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        outputs = dict.fromkeys(_OUTPUTS | {"cost_per_hour", "storage_cost_per_month", "price_source"})
        inputs = {**outputs, **props, "value": pulumi.Output.secret(props["value"])}
        hidden = pulumi.ResourceOptions(additional_secret_outputs=["value", "value_hash"])
        super().__init__(SecretProvider(), name, inputs, pulumi.ResourceOptions.merge(opts, hidden))
