"""`runpod:Secret`: a RunPod console secret, referenced from env as `{{ RUNPOD_SECRET_<name> }}`.

Retired in trainstack: RunPod's secret store exists only in GraphQL, which RunPod retires (410 Gone, early
2027; docs/RUNPOD-CONTRACT.md). Stacks no longer declare these; a node's secrets reach it over SSH
(`delivery:SecretsFile`). The resource stays so that a state made before holds a provider that can delete
them: while GraphQL answers, `scripts/up` deletes them; once it answers 410 (or 429 past the deadline),
delete and read succeed as no-ops, and delete names what is left in the RunPod console for a person to
delete.

The value travels as a Pulumi secret input and is sent to RunPod only in GraphQL variables. Outputs
never hold it: change detection compares a salted hash kept as `value_hash` (itself a Pulumi secret).

Why a fast hash (HMAC-SHA256 keyed by a random 16-byte salt) and not a slow KDF: the state already holds
the value itself, encrypted, as the resource's secret input, so whoever can read `value_hash` can read the
value; a slow KDF would protect nothing and cost ~0.15 s on every diff of every secret (every preview).
Hashes written by earlier versions (`pbkdf2-sha256$...`) are still recognised.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets as pysecrets
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.dynamic import CheckResult, CreateResult, DiffResult, ReadResult, UpdateResult

from common import contract
from facts import secrets
from providers.resource import ResourceInputs, TypedResource
from providers.runpod import errors
from providers.runpod.base import RunPodProvider, args_of, is_unknown
from providers.runpod.inputs import SecretInputs
from providers.runpod.models import SecretSpec

_SCHEME = "hmac-sha256"
_LEGACY_SCHEME = "pbkdf2-sha256"


reference = secrets.reference  # how pods refer to the secret in env values (facts.secrets)


def hash_value(value: str, salt: bytes | None = None) -> str:
    salt = salt if salt is not None else pysecrets.token_bytes(16)
    digest = hmac.new(salt, value.encode(), hashlib.sha256).hexdigest()
    return f"{_SCHEME}${salt.hex()}${digest}"


def matches(value: str, stored: Any) -> bool:
    """Whether `value` is the one `stored` (a `hash_value` result, or an older PBKDF2 one) came from."""
    parts = str(stored).split("$")
    try:
        if parts[0] == _SCHEME and len(parts) == 3:
            salt, digest_hex = bytes.fromhex(parts[1]), parts[2]
            digest = hmac.new(salt, value.encode(), hashlib.sha256).hexdigest()
        elif parts[0] == _LEGACY_SCHEME and len(parts) == 4:
            rounds, salt, digest_hex = int(parts[1]), bytes.fromhex(parts[2]), parts[3]
            if not 1 <= rounds <= 10_000_000:
                return False
            digest = hashlib.pbkdf2_hmac("sha256", value.encode(), salt, rounds).hex()
        else:
            return False
    except ValueError:
        return False
    return hmac.compare_digest(digest, digest_hex)


class SecretProvider(RunPodProvider):
    """Lifecycle of `runpod:Secret`; names are immutable (replace), the value updates in place."""

    args_model = SecretSpec
    # RunPod has no call to change a name or description: both replace. Names are unique, so the
    # old secret must go before the new one can take its name.
    replace_keys = frozenset({"name", "description"})
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
        args = args_of(SecretSpec, props)
        with self.client() as client:
            created = client.create_secret(args.name, args.value, args.description)
        return CreateResult(created.id, self._outs(props, created.id, hash_value(args.value)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        with self.client() as client:
            try:
                found = [s for s in client.list_secrets() if s.id == id_]
            except errors.ApiError as exc:
                if not errors.graphql_unavailable(exc):
                    raise
                return ReadResult(id_, props)  # cannot be looked at any more: kept as the state has it
        if not found:
            return ReadResult(None, {})
        # The value cannot be read back; the stored hash still describes what we last wrote.
        return ReadResult(id_, self._outs({**props, "name": found[0].name}, id_, props.get("value_hash")))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        args = args_of(SecretSpec, news)
        stored = olds.get("value_hash")
        if not matches(args.value, stored):
            with self.client() as client:
                client.update_secret_value(id_, args.value)
            stored = hash_value(args.value)
        return UpdateResult(self._outs(news, id_, stored))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        with self.client() as client:
            try:
                client.delete_secret(id_)
            except errors.ApiError as exc:
                if not errors.graphql_unavailable(exc):
                    raise
                _notice(errors.left_in_console(str(props.get("name") or "?"), id_, exc))

    def _outs(self, props: Mapping[str, Any], secret_id: str, value_hash: Any) -> dict[str, Any]:
        kept = {k: v for k, v in self.carried(props).items() if k != "value"}  # never the plain value
        return self.outputs(
            kept, secret_id=secret_id, reference=reference(str(props["name"])), value_hash=value_hash
        )


def _notice(message: str) -> None:
    """A line on the resource's row of `pulumi up`/`destroy`."""
    pulumi.log.warn(message)


class Secret(TypedResource, module=contract.SECRET.module, name=contract.SECRET.name):
    """A RunPod secret (`pulumi-python:dynamic/runpod:Secret`); `value` is always a Pulumi secret."""

    secret_id: pulumi.Output[str]
    reference: pulumi.Output[str]
    value_hash: pulumi.Output[str]  # salted, to see the value change; a secret output
    cost_per_hour: pulumi.Output[float]
    storage_cost_per_month: pulumi.Output[float]
    price_source: pulumi.Output[str]

    provider_factory = SecretProvider
    secret_outputs = ("value", "value_hash")

    def props_of(self, inputs: ResourceInputs) -> dict[str, Any]:
        assert isinstance(inputs, SecretInputs)
        return {**inputs.to_props(), "value": pulumi.Output.secret(inputs.value)}
